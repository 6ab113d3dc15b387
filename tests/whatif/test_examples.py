"""Every scenario of the library is a small example whose key figures the simulator still
gives, with the closed form beside them where one holds.

See :mod:`tests.whatif.examples` for what is stored, how to regenerate and why each
regeneration must say why. Figures are compared to 1e-9 relative: the streams are
seeded, so any larger change is a change of behaviour, not noise.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import each
from tests.whatif.examples import EXAMPLES, figures_of, scenario_paths

PATHS = scenario_paths()
#: How far (in standard errors of the simulated mean) the closed form may lie: a fixed
#: seed makes the check deterministic; 3.5 SE is what a correct model misses once in
#: about 2,000 regenerations.
CLOSED_FORM_SE = 3.5
#: Where no replication saw a failure, how far above the simulation the closed form may
#: lie (what failures too rare for the replications to see may add).
RARE_FAILURES = 0.01


def _stored(name: str) -> dict:
    path = EXAMPLES / f"{name}.json"
    if not path.exists():
        pytest.fail(f"no example for {name}: run `.venv/bin/python -m tests.whatif.examples "
                    f"--why '…' {name}`")
    return json.loads(path.read_text())


def test_library_has_the_studies_of_the_issue():
    names = {p.stem for p in PATHS}
    for required in ("quickstart", "daly-15min", "daly-6h", "daly-24h", "llama3-405b",
                     "resnet50-abci-strategies", "burst-buffer-multilevel",
                     "burst-buffer-pfs-only", "ckpt-format-pytorch", "ckpt-format-tensorflow",
                     "ckpt-format-chainer"):
        assert required in names


def test_every_scenario_has_an_example_and_none_is_stale():
    assert {p.stem for p in PATHS} == {g.stem for g in EXAMPLES.glob("*.json")}, \
        "run `.venv/bin/python -m tests.whatif.examples --why '…'` and review what moved"


def test_every_example_says_why_it_was_last_regenerated():
    for path in each(EXAMPLES.glob("*.json")):
        assert len(json.loads(path.read_text()).get("why", "").strip()) >= 10, path.name


def test_every_scenario_says_what_it_asks():
    for path in each(PATHS):
        text = path.read_text()
        assert text.startswith("#") or "\ndescription:" in text, path.name


def _close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9,
                                                                abs_tol=1e-12)
    return a == b


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_example(path):
    want = _stored(path.stem)
    got = json.loads(json.dumps(figures_of(path)))
    diffs = [f"{part}.{k}: got {got[part].get(k)!r}, stored {v!r}"
             for part in ("key", "resolved") for k, v in want[part].items()
             if not _close(got[part].get(k), v)]
    diffs += [f"{k}: got {got[k]!r}, stored {want[k]!r}"
              for k in ("replications", "seed", "engine", "closed_form_wall_time_s")
              if not _close(got[k], want[k])]
    assert not diffs, (f"{path.name} moved from its example (regenerate with --why if "
                       "intended):\n" + "\n".join(diffs))
    key = got["key"]
    # where time went adds up to the wall time, replication by replication
    parts = sum(key[k] for k in ("useful_s", "checkpoint_s", "lost_s", "restart_s",
                                 "waiting_s"))
    assert parts == pytest.approx(key["wall_time_s"], rel=1e-9)
    # never faster than the work itself
    assert key["wall_time_s"] >= got["resolved"]["work_s"] * (1 - 1e-12)
    closed = got["closed_form_wall_time_s"]
    if closed is None:
        return
    sim = key["wall_time_s"]
    if key["wall_time_std_s"] <= 1e-9 * sim:
        # no replication saw a failure: the closed form's expectation is the failure-free
        # time plus what the rare failures cost, so it lies just above the simulation
        assert sim * (1 - 1e-9) <= closed <= sim * (1 + RARE_FAILURES), (sim, closed)
        return
    se = key["wall_time_std_s"] / math.sqrt(got["replications"])
    assert abs(sim - closed) <= CLOSED_FORM_SE * se, \
        (f"{path.name}: simulated {sim:.6g} s vs closed form {closed:.6g} s "
         f"({(sim - closed) / se:+.1f} SE)")


def test_the_library_holds_closed_forms_to_check():
    """At least the Daly cases and the quickstart have a closed form beside them."""
    with_closed = {p.stem for p in PATHS if _stored(p.stem)["closed_form_wall_time_s"]}
    assert {"daly-15min", "daly-6h", "daly-24h"} <= with_closed, with_closed
