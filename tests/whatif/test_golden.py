"""Every scenario of the library has a golden summary, and the simulator still gives it.

See :mod:`tests.whatif.golden_summaries` for what is stored and how to regenerate.
Floats are compared to 1e-9 relative: the streams are seeded, so any larger change
is a change of behaviour, not noise.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.whatif.golden_summaries import GOLDEN, scenario_paths, summary_of

PATHS = scenario_paths()


def _compare(got, want, path: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        diffs = [f"{path}.{k}: missing" for k in want if k not in got]
        diffs += [f"{path}.{k}: unexpected" for k in got if k not in want]
        for k in want:
            if k in got:
                diffs += _compare(got[k], want[k], f"{path}.{k}")
        return diffs
    if isinstance(want, float) or isinstance(got, float):
        if want is None or got is None or not math.isclose(got, want, rel_tol=1e-9,
                                                           abs_tol=1e-12):
            return [f"{path}: got {got!r}, golden {want!r}"]
        return []
    return [] if got == want else [f"{path}: got {got!r}, golden {want!r}"]


def test_library_has_the_studies_of_the_issue():
    names = {p.stem for p in PATHS}
    for required in ("quickstart", "daly-15min", "daly-6h", "daly-24h", "llama3-405b",
                     "resnet50-abci-strategies", "burst-buffer-multilevel",
                     "burst-buffer-pfs-only", "ckpt-format-pytorch", "ckpt-format-tensorflow",
                     "ckpt-format-chainer"):
        assert required in names


def test_every_scenario_has_a_golden_file_and_no_golden_is_stale():
    assert {p.stem for p in PATHS} == {g.stem for g in GOLDEN.glob("*.json")}, \
        "run `.venv/bin/python -m tests.whatif.golden_summaries` and review the diff"


def test_every_scenario_says_what_it_asks():
    for path in PATHS:
        text = path.read_text()
        assert text.startswith("#") or "\ndescription:" in text, path.name


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_golden_summary(path):
    golden = GOLDEN / f"{path.stem}.json"
    if not golden.exists():
        pytest.fail(f"no golden summary for {path.name}: run "
                    "`.venv/bin/python -m tests.whatif.golden_summaries`")
    want = json.loads(golden.read_text())
    got = json.loads(json.dumps(summary_of(path)))
    diffs = _compare(got, want)
    assert not diffs, f"{path.name} differs from its golden summary:\n" + "\n".join(diffs[:20])
