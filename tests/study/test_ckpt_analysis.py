"""The checkpoint study's arithmetic and verdicts, on rows whose answers are known:
the phases of a save add up to it, and each claim is supported, contradicted or left
undecided by exactly the rule it prints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.app.study.ckpt_analysis import (
    REAL_SIZE_BYTES,
    advice,
    bottleneck_claim,
    findings,
    restart_claim,
    scaling_claims,
)
from testbed.app.study.ckpt_results import (
    SAVE_PHASES,
    FormatRow,
    RestartRow,
    ScalingRow,
    pool_dd,
)
from tests.conftest import each

MB = 10**6


def record(fmt="torch.save", framework="torch", nbytes=200 * MB, save=1.0, commit=0.3,
           sha=0.1, dd=0.1, dd_fsync=0.2, compressed=False, parameters=25_557_032):
    return {"framework": framework, "model": "resnet50", "format": fmt,
            "parameters": parameters, "tensors": 161, "state_bytes": 8 * parameters,
            "ckpt_bytes": nbytes, "files": 1, "includes_optimizer": True,
            "compressed": compressed, "repeats": 3, "save_s": save * 1.1, "save_min_s": save,
            "commit_s": commit, "sha256_s": sha, "load_s": 0.5, "load_min_s": 0.4,
            "dd_write_s": dd, "dd_fsync_s": dd_fsync, "dd_read_s": 0.05,
            "commit_in_save": commit is None}


@given(save=st.floats(1e-4, 10), extra=st.floats(0, 5), sha=st.floats(0, 1),
       dd=st.floats(1e-5, 10))
def test_the_phases_add_up_to_the_durable_save(save, extra, sha, dd):
    row = FormatRow.from_record(record(save=save, commit=sha + extra, sha=sha, dd=dd))
    assert sum(getattr(row, p) for p in SAVE_PHASES) == pytest.approx(row.durable_s)
    assert row.durable_s == pytest.approx(save + sha + extra)
    assert row.bottleneck in SAVE_PHASES
    assert row.page_cache_s <= row.save_min_s


def test_dd_is_pooled_over_checkpoints_of_about_the_same_size():
    recs = [record(nbytes=200 * MB, dd=0.30, dd_fsync=0.5),
            record(fmt="b", nbytes=204 * MB, dd=0.10, dd_fsync=0.9),
            record(fmt="c", nbytes=100 * MB, dd=0.01, dd_fsync=0.01)]
    pooled = pool_dd(recs)
    assert pooled[0]["dd_write_s"] == pytest.approx(0.10 * 200 / 204)
    assert pooled[0]["dd_fsync_s"] == 0.5 and pooled[1]["dd_fsync_s"] == pytest.approx(
        0.5 * 204 / 200)
    assert pooled[2]["dd_write_s"] == 0.01 and pooled[2]["dd_runs"] == 3   # alone: its own
    assert pooled[0]["dd_runs"] == 6


def test_derived_ratios():
    row = FormatRow.from_record(record(nbytes=210 * MB, save=1.0, commit=0.4, dd_fsync=0.35))
    assert row.durable_vs_dd == pytest.approx(1.4 / 0.35)
    assert row.save_GBps == pytest.approx(0.21)
    assert row.overhead_ratio == pytest.approx(210e6 / (8 * 25_557_032) - 1)
    assert row.bottleneck == "serialise_s"       # 1.0 − 0.1 dd: the framework's own time


def test_harness_rows_commit_inside_their_save():
    row = FormatRow.from_record(record(fmt="harness", commit=None, save=1.0, sha=0.1, dd=0.1,
                                       dd_fsync=0.3))
    assert row.durable_s == 1.0 and row.flush_s == pytest.approx(0.2)
    assert row.serialise_s == pytest.approx(1.0 - 0.1 - 0.1 - 0.2)


def test_bottleneck_claim_follows_its_rule():
    slow = FormatRow.from_record(record(save=2.0, commit=0.3, dd_fsync=0.2))
    fast = FormatRow.from_record(record(fmt="save_npz", framework="chainer", save=0.1,
                                        commit=0.2, dd_fsync=0.2))
    assert bottleneck_claim([slow, fast]).verdict == "supported"
    assert "torch torch.save" in bottleneck_claim([slow, fast]).evidence
    assert bottleneck_claim([fast]).verdict == "contradicted"
    small = FormatRow.from_record(record(nbytes=REAL_SIZE_BYTES - 1, save=2.0))
    assert bottleneck_claim([small]).verdict == "undecided"
    assert bottleneck_claim([fast], factor=0.9).verdict == "supported"
    harness = FormatRow.from_record(record(fmt="harness", commit=None, save=5.0))
    assert bottleneck_claim([fast, harness]).verdict == "contradicted"   # not a framework's


def restart(framework, omit=None, identical=True, new=True):
    return RestartRow(framework=framework, model="mlp", seed=0, steps=8, k=3, omit=omit,
                      loaded_step=3, straight_sha256="a" * 64,
                      restored_sha256="a" * 64 if identical else "b" * 64,
                      losses_equal=identical, params_equal=identical, parameters=10,
                      server_pid=1, restore_pid=2 if new else 1, new_process=new,
                      fresh_interpreter=False)


def test_restart_claim_follows_its_rule():
    complete = [restart(fw) for fw in ("torch", "tensorflow", "chainer")]
    teeth = [restart(fw, omit="rng", identical=False) for fw in ("torch", "chainer")]
    assert restart_claim(complete + teeth).verdict == "supported"
    assert restart_claim(complete).verdict == "undecided"                  # no teeth shown
    assert restart_claim(complete[:2] + teeth).verdict == "undecided"      # chainer not run
    assert "chainer" in restart_claim(complete[:2] + teeth).evidence
    toothless = [restart("torch", omit="rng", identical=True)]
    assert restart_claim(complete + toothless).verdict == "undecided"
    broken = [restart("torch", identical=False)]
    assert restart_claim(complete + teeth + broken).verdict == "contradicted"
    same_process = [restart("torch", new=False)]
    assert restart_claim(complete + teeth + same_process).verdict == "contradicted"


def scaling(writers, runs, speedup=None, low=None, high=None, confidence=0.97):
    return ScalingRow(framework="torch", model="resnet50", mode="sharded", writers=writers,
                      repeats=len(runs), bytes_total=200 * MB,
                      bytes_per_writer=200 * MB // writers, wall_s=min(runs),
                      wall_min_s=min(runs), durable_s=min(runs), durable_min_s=min(runs),
                      writer_save_s=min(runs), dd_durable_s=0.2, durable_runs_s=tuple(runs),
                      aggregate_GBps=0.2 / min(runs), dd_GBps=1.0, speedup=speedup,
                      speedup_low=low, speedup_high=high, speedup_confidence=confidence)


@pytest.mark.parametrize("low, high, confidence, verdict", [
    (1.3, 1.8, 0.97, "supported"), (1.0, 1.5, 0.97, "undecided"),
    (0.6, 0.95, 0.97, "contradicted"), (1.3, 1.8, 0.90, "undecided")])
def test_scaling_claim_follows_its_rule(low, high, confidence, verdict):
    rows = [scaling(1, [1.0] * 5, 1.0, 1.0, 1.0),
            scaling(2, [0.7] * 5, (low + high) / 2, low, high, confidence)]
    (claim,) = scaling_claims(rows)
    assert claim.verdict == verdict and claim.scope == "torch"
    assert scaling_claims(rows[:1])[0].verdict == "undecided"


def test_the_speedup_interval_is_hodges_lehmann_with_moses_bounds():
    """Five runs a side: the median of the 25 ratios, and the 3rd smallest and largest
    (Mann–Whitney's exact P(U ≤ 2) = 4/252 per tail: coverage 1 − 8/252)."""
    from testbed.app.study.ckpt_stats import ratio_interval
    one, many = [1.0, 1.1, 0.9, 1.05, 0.95], [0.5, 0.55, 0.45, 0.52, 0.48]
    ratios = sorted(a / b for a in one for b in many)
    iv = ratio_interval(one, many)
    assert iv.estimate == pytest.approx(ratios[12])
    assert (iv.low, iv.high) == (pytest.approx(ratios[2]), pytest.approx(ratios[22]))
    assert iv.achieved == pytest.approx(1 - 8 / 252)
    two = ratio_interval([1.0, 1.2], [1.1, 0.9])      # too few: the whole range, said so
    assert two.achieved < 0.95 and two.low == pytest.approx(1 / 1.1)


def test_findings_and_advice_name_the_measured_formats():
    rows = [FormatRow.from_record(record(fmt=f, save=s, compressed=c, nbytes=n))
            for f, s, c, n in (("torch.save", 0.9, False, 205 * MB),
                               ("torch.distributed.checkpoint", 0.5, False, 206 * MB),
                               ("zipped", 5.0, True, 190 * MB))]
    found = findings(rows)
    assert [f.framework for f in found] == ["torch"]
    f = found[0]
    assert (f.fastest_format, f.slowest_format, f.main_format) == (
        "torch.distributed.checkpoint", "zipped", "torch.save")
    lines = advice(rows, found, [], [], [])
    assert any("save with torch.distributed.checkpoint" in a for a in each(lines))
    assert any("zipped saves 7.8% of the bytes" in a for a in lines)
