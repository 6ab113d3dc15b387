"""Shared fixtures for the model tests: where ParaDL's input files live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_CANDIDATES = (
    os.environ.get("TESTBED_PARADL_INPUTS", ""),
    str(REPO / "scenarios" / "paradl"),
    str(REPO.parent / "shared" / "data" / "abci-paradl" / "paradl-inputs"),
)


@pytest.fixture(scope="session")
def paradl_dir() -> Path:
    """The folder with ParaDL's ``.net`` files (env TESTBED_PARADL_INPUTS overrides)."""
    for candidate in _CANDIDATES:
        if candidate and (Path(candidate) / "RESNET50_ImageNet_profall.net_sc").is_file():
            return Path(candidate)
    pytest.fail("ParaDL input files not found; set TESTBED_PARADL_INPUTS")
