"""The local loop end to end (``calibrate-local --quick``, what CI runs): real runs of
the three frameworks on this machine → records → profile → verified on configurations
the fit never saw, and the held-out fault-injected runs replayed.

The thresholds here are for two busy CI cores and the quick design; the README's
figures come from the full design (``testbed calibrate-local``)."""

from __future__ import annotations

import hashlib
import json

import pytest

from testbed.calibration.profile import load_calibrated
from testbed.measurements import read_records
from tests.calibration.conftest import one_line_error, run_testbed
from tests.conftest import each

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(900)]

FRAMEWORKS = ("torch", "tensorflow", "chainer")
#: Least accuracy (ParaDL's mean of min/max) out of sample on the quick design, and the
#: least of any one held-out configuration (the issue's bars are 0.85 and 0.6 on the
#: full design; the quick one measures fewer steps on a machine other tests load).
#: The replayed runs' floors guard against gross replay errors, not the 10% bar: on
#: two shared cores a restart (85–95% of such a run) is a framework import whose time
#: follows the machine's load, so one replay measured 0.99 idle and 0.65 under load. The
#: mean over the three frameworks (``run_wall_s``) is held to 0.55; one run is one
#: sample, so each alone only to :data:`ONE_RUN_FLOOR` (off by less than 2.5×): a
#: Chainer run is three ~1 s restarts, which measured 1.6× their fitted time when a
#: second test suite loaded the cores (0.51 and 0.53 in two such runs).
#: Data-parallel steps (ranks sharing the two cores) are heavy-tailed: their floor is a
#: guard against the old error (no sharing, no loss all-reduce, no scheduling delay:
#: 0.05–0.42), not the 25% bar the README's figures are held to.
QUICK_FLOOR = {**{f"{fw}_step_s": 0.80 for fw in FRAMEWORKS},
               "checkpoint_save_s": 0.60, "gloo_allreduce_2p_s": 0.60, "run_wall_s": 0.55,
               "torch_dp2_step_s": 0.50, "torch_dp3_step_s": 0.50}
#: The worst held-out step configurations are single measurements too: of the 7 of a
#: framework, the second worst is held to :data:`QUICK_WORST` and the worst alone only
#: to :data:`ONE_RUN_FLOOR` (off by less than 2.5×). Load spoils one measurement, not
#: two: under a second test suite Chainer's mlp-w128 b=64 once measured 2.17 ms a step on
#: a core (accuracy 0.50 against 1.08 ms predicted) where it measured 1.03 and 1.14 ms in
#: the suites run just before and beside it. So a model wrong for one configuration by
#: 1.8–2.5× passes here; the full design's figures in the README hold each to 0.6.
QUICK_WORST = {f"{fw}_step_s": 0.55 for fw in FRAMEWORKS}
ONE_RUN_FLOOR = 0.40


def test_quick_loop_writes_records_manifest_and_profile(quick_loop):
    folder = quick_loop["records"]
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert manifest["design"]["name"] == "quick"
    for entry in each(manifest["files"], 2):
        data = (folder / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert len(read_records(folder / entry["file"])) == entry["records"] > 0
    prof = load_calibrated(quick_loop["profile"])
    assert prof.fit.machine.host == manifest["machine"]["host"]
    # every framework: compute, checkpoint storage and a restart fit on ≥ 5 restarts
    assert {c.framework for c in prof.fit.compute} == set(FRAMEWORKS)
    assert {s.framework for s in prof.fit.storage} == set(FRAMEWORKS)
    assert {r.framework for r in prof.fit.restart} == set(FRAMEWORKS)
    for fit in each(prof.fit.restart, 3):
        assert fit.points >= 5, fit
        # the load each restart ran under, read while it was under way (Linux)
        assert fit.runnable_tasks is not None and fit.runnable_tasks > 0, fit
        assert fit.cpu_stretch is not None and fit.cpu_stretch >= 1.0, fit
        # and how slow the cores ran: the supervisor's probe (ms of a ~1-2 ms slice)
        assert fit.core_probe_ms is not None and 0.1 < fit.core_probe_ms < 100, fit
    assert {ab.processes for ab in prof.fit.network} == {2, 3, 4}
    # the scheduling delay of ranks sharing the cores, from the two fitted runs
    (dp,) = prof.fit.data_parallel
    assert (dp.backend, dp.processes, dp.points) == ("gloo", (2, 3), 2)
    assert 1 <= dp.cores <= manifest["machine"]["cpu_count"]


def test_every_record_says_how_it_was_measured(quick_loop):
    records = [r for _, r in read_records(quick_loop["records"] / "fit.jsonl")]
    steps = [r for r in records if r.kind == "train_summary"]
    for rec in each(steps, 30):
        m = rec.method
        assert m is not None and m.statistic == "median of round medians", rec
        assert (m.warmup, m.rounds, m.clock) == (3, 3, "wall") and m.affinity
        assert rec.metrics.step_round_lo_s <= rec.metrics.step_s <= rec.metrics.step_round_hi_s


@pytest.mark.measured
def test_quick_loop_verifies_out_of_sample(quick_loop):
    quantities = quick_loop["summary"]["verify"]["quantities"]
    for name, floor in each(QUICK_FLOOR.items(), 6):
        assert quantities[name]["n"] > 0, name
        assert quantities[name]["accuracy"] >= floor, (name, quantities[name])
    for name, floor in each(QUICK_WORST.items(), 3):
        worst, second, *_ = sorted(w["accuracy"] for w in each(quantities[name]["worst"], 2))
        assert worst >= ONE_RUN_FLOOR, (name, quantities[name]["worst"])
        assert second >= floor, (name, quantities[name]["worst"])


def test_recalibrating_from_the_loops_records_gives_the_same_bytes(quick_loop, tmp_path):
    fit = quick_loop["records"] / "fit.jsonl"
    again = tmp_path / "again.yaml"
    proc = run_testbed("calibrate", str(fit), "--base", "laptop-cpu", "-o", str(again))
    assert proc.returncode == 0, proc.stderr
    assert again.read_bytes() == quick_loop["profile"].read_bytes()


def test_calibrate_leaves_out_the_folders_holdout_and_verify_refuses_the_fit_set(
        quick_loop, tmp_path):
    folder = quick_loop["records"]
    # FOLDER/*.jsonl as a shell expands it: the hold-out file is left out, saying so
    again = tmp_path / "glob.yaml"
    proc = run_testbed("calibrate", *sorted(str(p) for p in folder.glob("*.jsonl")),
                       "--base", "laptop-cpu", "-o", str(again))
    assert proc.returncode == 0, proc.stderr
    assert "holdout.jsonl left out" in proc.stderr
    assert again.read_bytes() == quick_loop["profile"].read_bytes()
    # the records the profile was fitted on are not a verification of it
    line = one_line_error(run_testbed("verify", str(quick_loop["profile"]),
                                      str(folder / "fit.jsonl")))
    assert "fit.jsonl" in line and "in sample" in line
    ok = run_testbed("verify", str(quick_loop["profile"]), str(folder / "fit.jsonl"),
                     "--in-sample", "--json")
    assert ok.returncode == 0, ok.stderr


@pytest.mark.measured
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_replay_of_the_held_out_run(quick_loop, framework, tmp_path):
    lines = [line for line in (quick_loop["records"] / "holdout.jsonl").read_text().splitlines()
             if '"kind":"supervised_run"' in line and f'"framework":"{framework}"' in line]
    run = tmp_path / "run.jsonl"
    run.write_text(each(lines)[0] + "\n")
    proc = run_testbed("simulate", "--replay-run", str(run), "--system",
                       str(quick_loop["profile"]), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["predicted"]["kills"] == out["measured"]["kills"] == len(out["kills"]) == 3
    assert out["predicted"]["wall_time_s"] == pytest.approx(out["schedule_wall_s"], rel=1e-9)
    # the damaged checkpoint's fall-back is replayed: the steps lost are the real run's
    assert out["predicted"]["lost_steps"] == out["measured"]["lost_steps"]
    # the run's own load during its restarts is on the record, for the replay to price
    metrics = json.loads(lines[0])["metrics"]
    assert metrics["restart_runnable_tasks"] > 0 and metrics["train_runnable_tasks"] > 0
    # and what its workers lived: on a core or waiting for one, per thread (loadprobe)
    assert all(metrics[f"{part}_cpu_stretch"] >= 1.0 for part in ("start", "restart", "train"))
    # and how slow the cores ran (the training of 16 small steps may end before the
    # supervisor's first probe of it, every 0.2 s: then it has none)
    assert all(metrics[f"{part}_core_probe_ms"] > 0 for part in ("start", "restart"))
    assert metrics.get("train_core_probe_ms") is None or metrics["train_core_probe_ms"] > 0
    assert out["wall_time_accuracy"] >= ONE_RUN_FLOOR
    text = run_testbed("simulate", "--replay-run", str(run), "--system",
                       str(quick_loop["profile"]))
    assert text.returncode == 0 and "wall time" in text.stdout and "measured" in text.stdout
    assert "useful time" in text.stdout and "lost time" in text.stdout


def test_calibrate_local_checks_its_targets_first(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_testbed("calibrate-local", "--quick", "-o", str(tmp_path / "p.yaml"),
                       "--records", str(blocker))
    assert proc.returncode == 2 and "--records" in proc.stderr
    proc = run_testbed("calibrate-local", "--quick", "-o", str(tmp_path / "no" / "p.yaml"))
    assert proc.returncode == 2 and "-o" in proc.stderr
    proc = run_testbed("calibrate-local", "--quick", "-o", str(tmp_path / "p.yaml"), "--base",
                       "no-such-system", "--records", str(tmp_path / "r"))
    assert proc.returncode == 2 and "unknown system" in proc.stderr
    assert not (tmp_path / "r").exists()
    # never into the package or the shipped reference records
    for inside in ("traces/measurements/vm", "testbed/data"):
        line = one_line_error(run_testbed("calibrate-local", "--quick", "-o",
                                          str(tmp_path / "p.yaml"), "--records", inside))
        assert "--records" in line and "folder of your own" in line
