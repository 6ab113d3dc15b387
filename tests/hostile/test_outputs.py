"""Outputs a command cannot or must not write: checked before the work, one line, exit 2,
nothing half-written, nothing outside the report folder, the previous report intact."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import each
from tests.hostile.cases import CALIBRATION_CSV, SCENARIO
from tests.hostile.harness import assert_refused, run_bounded, run_in_process, tree_state

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def work(tmp_path) -> Path:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    shutil.copy(REPO / "traces" / "fta_event_trace_sample.tab", tmp_path / "fta.tab")
    (tmp_path / "a-folder").mkdir()
    return tmp_path


def _writers(work: Path, target: str) -> list[list[str]]:
    return [["simulate", "s.yaml", "-r", "2", "--events", target],
            ["traces", "import-fta", "fta.tab", "-o", target],
            ["model", "export", "alexnet", "-o", target],
            ["run", "s.yaml", "-r", "2", "-o", target]]


@pytest.mark.parametrize("target", ["a-folder", "missing/sub/out", "/sys/testbed-out",
                                    "/proc/self/testbed-out"])
def test_unwritable_targets_are_refused_before_any_work(work, target):
    before = tree_state(work)
    for args in each(_writers(work, target)):
        if args[0] == "run" and target == "a-folder":
            continue   # an empty folder is a fine report target
        out = run_in_process(args, cwd=work)
        assert_refused(out, names=target.split("/")[0] or target)
        assert tree_state(work) == before, args


def test_a_report_folder_holding_other_files_is_not_replaced(work):
    (work / "a-folder" / "thesis.tex").write_text("years of work")
    before = tree_state(work)
    assert_refused(run_in_process(["run", "s.yaml", "-r", "2", "-o", "a-folder"], cwd=work),
                   names="a-folder")
    assert tree_state(work) == before


def test_a_full_disk_leaves_the_previous_report_as_it_was(work):
    ok = run_in_process(["run", "s.yaml", "-r", "2", "-o", "rep"], cwd=work)
    assert ok.code == 0, ok.stderr
    before = tree_state(work)
    # a 20 kB file-size limit: the first PNG cannot be written (EFBIG, as ENOSPC would)
    out = run_bounded(["run", "s.yaml", "-r", "2", "-o", "rep"], cwd=work, fsize_bytes=20_000)
    assert_refused(out, names="rep")
    assert tree_state(work) == before, "the previous report changed or temp files were left"


@pytest.mark.parametrize("name, folder", [("../../escape", "escape"), ("/etc/cron.d", "etc-cron.d"),
                                          ("team/exp1", "team-exp1"), ("a b:c", "a-b-c")])
def test_scenario_names_become_safe_folders_under_report(work, name, folder):
    (work / "n.yaml").write_text(SCENARIO.replace("name: hostile", f"name: {name!r}"))
    out = run_in_process(["run", "n.yaml", "-r", "2"], cwd=work)
    assert out.code == 0, out.stderr
    assert (work / "report" / folder / "index.html").is_file()
    assert sorted(p.name for p in (work / "report").iterdir()) == [folder]
    assert not (work.parent / "escape").exists()


@pytest.mark.parametrize("name", [".", "..", "/", "..."])
def test_scenario_names_without_a_usable_folder_are_refused(work, name):
    (work / "n.yaml").write_text(SCENARIO.replace("name: hostile", f"name: {name!r}"))
    before = tree_state(work)
    assert_refused(run_in_process(["run", "n.yaml", "-r", "2"], cwd=work), field="name")
    assert tree_state(work) == before


def _special_writers(target: str) -> list[list[str]]:
    """Every kind of output option: event logs, exports, profiles, stores, timelines."""
    return [["simulate", "s.yaml", "-r", "2", "--events", target],
            ["traces", "import-fta", "fta.tab", "-o", target],
            ["model", "export", "alexnet", "-o", target],
            ["sweep", "s.yaml", "--grid", "checkpoint.policy=fixed", "--grid", "checkpoint.interval=1h,2h", "-r", "2", "--store",
             target, "-q"],
            ["calibrate", str(REPO / "traces" / "measurements" / "vm" / "fit.jsonl"),
             "--base", "laptop-cpu", "-o", target],
            ["records", "import-paradl", "calibration.csv", "-o", target],
            ["real-run", "slurm", "--run", "train", "--nodes", "1", "-o", target],
            ["real-run", "train", "--framework", "torch", "--steps", "2", "--timeline",
             target],
            ["real-run", "profile", "--framework", "torch", "--steps", "2",
             "--measurements", target]]


@pytest.mark.parametrize("special", ["fifo", "device-link"])
def test_a_device_or_fifo_in_the_targets_place_is_never_written(work, special):
    """An atomic rename would replace a device node with a regular file, and opening a
    FIFO blocks until a reader comes: both are refused before any work."""
    (work / "calibration.csv").write_text(CALIBRATION_CSV)
    target = work / "target"
    if special == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/null")
    before = tree_state(work)
    for args in each(_special_writers(str(target))):
        out = run_bounded(args, cwd=work, timeout=60)
        assert_refused(out, names="target")
        assert "not a regular file" in out.stderr, (args, out.stderr)
        assert tree_state(work) == before, args
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
