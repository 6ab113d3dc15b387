"""The ledger of constants (issue 18): every number of every shipped profile says what
it rests on, a fitted constant is the fit of the data set it names (re-solved here),
and no figure counted as validation was a fit input."""

from __future__ import annotations

import pytest
import yaml

from testbed.io.packaged import data_dir
from testbed.systems.profile import list_systems, load_system
from testbed.systems.sources import dangling, ledger, numeric_paths, uncovered
from tests.conftest import each
from tests.oracle import fit_constants
from tests.oracle.figures import FIGURES, fitted_sets, split


def _data(name: str) -> dict:
    return yaml.safe_load((data_dir("systems") / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", list_systems())
def test_every_number_has_a_source(name):
    data, system = _data(name), load_system(name)
    paths = numeric_paths(data)
    assert len(paths) > 10
    assert uncovered(data, system.sources) == [], "constants without a source"
    assert dangling(data, system.sources) == [], "sources naming no constant"
    rows = ledger(data, system.sources)
    assert len(rows) == len(paths) and all(r["kind"] for r in rows)


def test_a_missing_source_is_found():
    data = _data("a100-cluster")
    sources = dict(load_system("a100-cluster").sources)
    del sources["gpu.sm_count"]
    assert uncovered(data, sources) == ["gpu.sm_count"]


@pytest.mark.parametrize("name", list_systems())
def test_assumptions_are_only_shares_of_shared_storage(name):
    """An assumed constant is said to be one, and none of the physics the published
    figures check rests on one."""
    rows = ledger(_data(name), load_system(name).sources)
    assumed = [r["path"] for r in rows if r["kind"] == "assumed"]
    assert all(p == "storage.pfs_job_share" for p in assumed), assumed


def test_fits_name_data_sets_of_the_suite():
    """A fit names data sets the suite holds, so its figures are reported as fitted."""
    known = {f.data_set for f in FIGURES}
    assert fitted_sets() <= known
    fitted, held = split()
    assert {f.data_set for f in fitted} == fitted_sets() & known
    assert not {f.data_set for f in held} & fitted_sets()


def test_the_a100_and_h100_profiles_model_the_same_software():
    """Issue 18 defect 1: the A100 profile carried a PyTorch-eager launch floor and the
    H100 one none (CUDA graphs), so the two modelled different stacks. Now both (and
    H200) carry the same software section and default."""
    stacks = [load_system(n).software for n in ("a100-cluster", "h100-cluster",
                                                 "h200-cluster")]
    assert all(s is not None for s in stacks)
    assert stacks[0] == stacks[1] == stacks[2]
    assert {load_system(n).gpu.launch_us_per_layer for n in ("a100-cluster", "h100-cluster")} \
        == {0.0}


def test_launch_costs_are_their_fit():
    launch, layer = fit_constants.fit_launch()
    for name in ("dgx1-v100", "a100-cluster", "h100-cluster"):
        stack = load_system(name).software.stacks["pytorch"]
        assert stack.launch_us == pytest.approx(launch, abs=0.01)
        assert stack.layer_us == pytest.approx(layer, abs=0.01)


@pytest.mark.parametrize("name,precision", sorted(fit_constants.GEMM_ROWS))
def test_gemm_efficiencies_are_their_fit(name, precision):
    key = "fp16" if precision in ("fp16", "bf16") else precision
    committed = load_system(name).gpu.gemm_efficiency[key]
    assert committed == pytest.approx(fit_constants.fit_gemm(name, precision), abs=2e-4)


def test_decode_cost_is_its_fit():
    stack = load_system("dgx1-v100").software.stacks["pytorch"]
    assert stack.decode_core_ms == pytest.approx(fit_constants.fit_decode(), abs=1e-3)


def test_ledger_command(cli):
    r = cli("oracle", "ledger", "--system", "h100-cluster", "--json")
    assert r.returncode == 0, r.stderr
    import json
    rows = json.loads(r.stdout)["constants"]
    by = {row["path"]: row for row in rows}
    assert by["gpu.sm_count"]["kind"] == "datasheet" and by["gpu.sm_count"]["value"] == 132
    assert by["gpu.gemm_efficiency.fp16"]["kind"] == "fit"
    assert "dle-pytorch-rn50-dgxa100" in by["gpu.gemm_efficiency.fp16"]["data"]
    r = cli("oracle", "ledger", "--system", "abci-v100")
    assert r.returncode == 0 and "constants:" in r.stdout and "without a source" not in r.stdout


def test_step_jitter_is_its_fit():
    """The DGX-class profiles' step jitter is the one fitted on MLPerf v4.0's 64-GPU H100
    run (tests/oracle/fit_constants.py), carried to every stack."""
    value = fit_constants.fit_jitter()
    for name in ("a100-cluster", "h100-cluster", "h200-cluster"):
        stacks = load_system(name).software.stacks
        assert len(stacks) >= 5
        for stack in each(stacks.values()):
            assert stack.step_jitter_us == pytest.approx(value, abs=0.2)
