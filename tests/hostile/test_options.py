"""Hostile command-line options of the real-run commands: sizes a machine cannot hold,
process counts it cannot run and models too large to build are refused in one line
before any framework process starts (issue "hostile inputs": nothing hangs, no
traceback)."""

from __future__ import annotations

import pytest

from tests.hostile.harness import assert_refused, run_in_process, tree_state

HUGE_SHAPE = "3x20000x20000"                      # 12.7 TiB of activations
BIG_MLP = ["--width", "65536", "--depth", "1000"]   # 4.3e12 parameters


@pytest.mark.parametrize("args, names", [
    (["real-run", "profile", "--framework", "torch", "--processes", "100000"], "--processes"),
    (["real-run", "profile", "--framework", "torch", "--processes", "0"], "--processes"),
    (["real-run", "profile", "--framework", "torch", "--model", "resnet", "--depth",
      "100000"], "depth"),
    (["real-run", "profile", "--framework", "torch", "--width", "100000000"], "width"),
    # within the bounds, but the parameters alone take about 69 TB (no machine has it)
    (["real-run", "profile", "--framework", "torch", *BIG_MLP], "needs about"),
    (["real-run", "profile", "--framework", "tensorflow", "--model", "resnet",
      "--input-shape", HUGE_SHAPE], "needs about"),
    (["real-run", "train", "--framework", "chainer", "--steps", "2", *BIG_MLP], "needs about"),
    (["real-run", "checkpoint-bench", "--framework", "torch", "--width", "65536"],
     None),
    (["real-run", "checkpoint-bench", "--framework", "torch", "--repeats", "0"], "--repeats"),
])
def test_a_run_the_machine_cannot_hold_is_refused_before_it_starts(tmp_path, args, names):
    before = tree_state(tmp_path)
    outcome = run_in_process(args, cwd=tmp_path)
    if names is None:   # 69 GB: refused unless this machine has that much available
        from real_runs.env import available_memory_bytes
        if (available_memory_bytes() or 0) > 80 * 2**30:
            pytest.skip("this machine could hold a 4.3e9-parameter MLP")
        names = "needs about"
    assert_refused(outcome, names=names)
    assert outcome.seconds < 5, "refused before any framework process started"
    assert tree_state(tmp_path) == before


def test_the_memory_estimate_is_the_models_own():
    """Parameters and activations come from the same layer IR the oracle uses."""
    from real_runs.harness import (
        ACTIVATION_BYTES,
        FRAMEWORK_BYTES,
        TRAINING_BYTES_PER_PARAM,
        RunConfig,
    )
    cfg = RunConfig(framework="torch", model="mlp", width=60000, steps=1).validated()
    m = cfg.ir()
    assert m.parameters == 60000 * 64 + 60000 + 60000 * 60000 + 60000 + 60000 * 10 + 10
    need = FRAMEWORK_BYTES["torch"] + m.parameters * TRAINING_BYTES_PER_PARAM \
        + m.activation_elements_per_sample * cfg.batch_size * ACTIVATION_BYTES
    assert need > 50 * 2**30


@pytest.mark.parametrize("args, names", [
    (["study", "checkpoint", "--repeats", "99999999999"], "--repeats"),
    (["study", "checkpoint", "--restart-steps", "999999999"], "--restart-steps"),
    (["study", "precision", "--resamples", "999999999999"], "--resamples"),
    (["study", "precision", "--permutations", "999999999999"], "--permutations"),
    (["study", "precision", "--seeds", "99999999"], "--seeds"),
    (["study", "hpo-scaling", "--no-measure", "--nodes", "nan"], "--nodes"),
    (["study", "hpo-scaling", "--measure-trials", "99999999"], "--measure-trials"),
    (["study", "oracle", "--target", "nan"], "--target"),
])
def test_a_study_that_could_not_finish_is_refused_before_it_starts(tmp_path, args, names):
    # counts that would run for days (or never: nan) are one line, at once, nothing written
    before = tree_state(tmp_path)
    outcome = run_in_process(args, cwd=tmp_path)
    assert_refused(outcome, names=names)
    assert outcome.seconds < 5
    assert tree_state(tmp_path) == before
