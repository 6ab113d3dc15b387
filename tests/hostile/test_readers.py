"""Every reader behind one validated schema: each case a review of the newer readers found, as a
regression test — exit 2 (1 for a full disk), at most three lines naming the file and
the field, no traceback, nothing new written, the inputs byte-identical, an answer in
seconds, no process left behind.

Grouped by surface: supervised-run timelines, measurement records and the ParaDL CSV,
YAML integers beyond Python's 4,300 digits, HPO sweeps and traces, checkpoint segments,
``.net`` files, failure traces and data sets, the SQLite stores, ``run`` and
``--allow-code``, real-run options, checkpoint manifests and the supervisor's worker.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import each
from tests.hostile.cases import (
    CALIBRATION_CSV,
    DATASET,
    HPO_SCENARIO,
    HPO_TRACE,
    REPLAY_PROFILE,
    SCENARIO,
    SYSTEM,
    TIMELINE,
)
from tests.hostile.harness import (
    REPO,
    Outcome,
    assert_refused,
    run_bounded,
    run_in_process,
    tree_state,
)

BIG = "9" * 5000          # over Python's 4,300-digit limit of int()
LONG = "9" * 4000         # under it, but beyond any physical value


def _refused(tmp: Path, args: list[str], *, names: str | None = None,
             field: str | None = None, bounded: bool = False, **kw) -> Outcome:
    """Run ``args`` in ``tmp``; the promise holds and nothing under ``tmp`` changes."""
    before = tree_state(tmp)
    out = run_bounded(args, cwd=tmp, **kw) if bounded else run_in_process(args, cwd=tmp)
    assert_refused(out, names=names, field=field)
    assert tree_state(tmp) == before, f"{args} changed files"
    return out


# --------------------------------------------------------------------------- timelines

TIMELINE_CASES = [
    ("a kill without a trigger", '"at_step":6,', '"at_step":null,', "at_step"),
    ("at_step five", '"at_step":6,', '"at_step":"five",', "at_step"),
    ("at_s negative", '"at_s":null,"at_step":6,', '"at_s":-3,"at_step":null,', "at_s"),
    ("no steps", '"steps":8,', '', "steps"),
    ("zero steps", '"steps":8,', '"steps":0,', "steps"),
    ("10^15 steps", '"steps":8,', '"steps":1000000000000000,', "steps"),
    ("an end time of 1e999", '"step":8,"t_s":6.9', '"step":8,"t_s":1e999', "t_s"),
    ("a negative end time", '"step":8,"t_s":6.9', '"step":8,"t_s":-5', "t_s"),
    # the same kinds, beyond the list
    ("no checkpoint interval", '{"checkpoint_every":4,', '{', "checkpoint_every"),
    ("a checkpoint interval of 0", '"checkpoint_every":4', '"checkpoint_every":0',
     "checkpoint_every"),
    ("a kill at 10^20 steps", '"at_step":6,', '"at_step":100000000000000000000,', "at_step"),
    ("two triggers", '"at_s":null,', '"at_s":2.5,', "at_s"),
    ("an unknown event", '"event":"restart_end"', '"event":"teleport"', "event"),
    ("an event that is a list", '"event":"restart_end"', '"event":["restart_end"]', "event"),
    ("a time that is text", '"step":4,"t_s":6.8', '"step":4,"t_s":"late"', "t_s"),
    ("negative lost steps", '"lost_steps":2', '"lost_steps":-2', "lost_steps"),
    ("a 1e300 s checkpoint", '"duration_s":0.05', '"duration_s":1e300', "duration_s"),
    ("a 5,000-digit step", '"step":4,"t_s":3.6', f'"step":{BIG},"t_s":3.6', "step"),
    ("a 5,000-digit input dimension", '"input_shape":"1x8x8"', f'"input_shape":"1x{BIG}"',
     "input_shape"),
    ("a depth of 10^9", '"width":64}', '"width":64,"depth":1000000000}', "depth"),
    ("a job_end before its job_start", '"step":8,"t_s":6.9', '"step":8,"t_s":0.0', None),
    ("a duplicate key", '"step":8,"t_s":6.9', '"step":8,"step":9,"t_s":6.9', "step"),
]


@pytest.mark.parametrize("what, old, new, field", TIMELINE_CASES,
                         ids=[c[0] for c in TIMELINE_CASES])
def test_a_broken_timeline_is_one_line_naming_the_field(tmp_path, what, old, new, field):
    assert old in TIMELINE
    path = tmp_path / "timeline.jsonl"
    path.write_text(TIMELINE.replace(old, new, 1) if what != "a job_end before its job_start"
                    else TIMELINE.replace('"t_s":0.0}', '"t_s":7.0}', 1).replace(old, new))
    _refused(tmp_path, ["simulate", "--replay-run", str(path), "--system", REPLAY_PROFILE],
             names=path.name, field=field)


def test_the_valid_timeline_replays_and_a_long_run_answers_at_once(tmp_path):
    path = tmp_path / "timeline.jsonl"
    path.write_text(TIMELINE)
    out = run_in_process(["simulate", "--replay-run", str(path), "--system", REPLAY_PROFILE,
                          "--json"], cwd=tmp_path)
    assert out.code == 0, out.stderr
    assert json.loads(out.stdout)["steps"] == 8
    # 10⁹ steps (the records' largest) with a checkpoint every 10⁶: the kill times come
    # from a closed form, not a walk over 10⁹ steps
    path.write_text(TIMELINE.replace('"steps":8,', '"steps":1000000000,').replace(
        '"checkpoint_every":4', '"checkpoint_every":1000000'))
    out = run_in_process(["simulate", "--replay-run", str(path), "--system", REPLAY_PROFILE],
                         cwd=tmp_path)
    assert out.code == 0 and out.seconds < 10, (out.stderr, out.seconds)
    # every checkpoint of 10⁹ steps: too many segments to replay, refused before it runs
    path.write_text(TIMELINE.replace('"steps":8,', '"steps":1000000000,').replace(
        '"checkpoint_every":4', '"checkpoint_every":1'))
    _refused(tmp_path, ["simulate", "--replay-run", str(path), "--system", REPLAY_PROFILE],
             field="checkpoint_every")


# ----------------------------------------------------------------------------- records

def _record() -> dict:
    line = (REPO / "traces" / "measurements" / "vm" / "fit.jsonl").read_text().splitlines()[0]
    return json.loads(line)


def _set(data: dict, path: str, value) -> dict:
    *head, last = path.split(".")
    node = data
    for key in head:
        node = node[key]
    node[last] = value
    return data


RECORD_CASES = [
    ("a list where a string belongs", "config.framework", ["torch"], "config.framework"),
    ("a kind that is a list", "kind", ["train_summary"], "kind"),
    ("a host that is a mapping", "env.host", {"a": 1}, "env.host"),
    ("a date 9999-99-99", "measured_at", "9999-99-99T99:99:99Z", "measured_at"),
    ("a date without a time", "measured_at", "9999-99-99", "measured_at"),
    ("a depth of 10^9", "config.model_options.depth", 1000000000, "depth"),
    ("an unknown model option", "config.model_options.layers", 3, "layers"),
    ("a 5,000-digit dimension", "config.input_shape", f"1x{BIG}x8", "config.input_shape"),
    ("a zero dimension", "config.input_shape", "1x0x8", "config.input_shape"),
    ("a name with a line break", "env.host", "vm\nevil", "env.host"),
    ("10^12 processes", "config.processes", 10**12, "config.processes"),
    ("a step of 1e-300 s", "metrics.step_s", 1e-300, "metrics.step_s"),
]


@pytest.mark.parametrize("what, path, value, field", RECORD_CASES,
                         ids=[c[0] for c in RECORD_CASES])
def test_a_broken_record_is_one_line_naming_file_line_and_field(tmp_path, what, path, value,
                                                                  field):
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps(_record()) + "\n" + json.dumps(_set(_record(), path, value))
                   + "\n")
    for args in (["records", "check", str(rec)],
                 ["calibrate", str(rec), "--base", "laptop-cpu", "-o", str(tmp_path / "p.yaml")]):
        out = _refused(tmp_path, args, names=f"{rec.name}:2", field=field)
        assert out.seconds < 5


@pytest.mark.parametrize("number", [LONG, BIG])
def test_an_integer_of_thousands_of_digits_in_a_record_is_one_line(tmp_path, number):
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps(_record()).replace('"steps": 15', f'"steps": {number}') + "\n")
    _refused(tmp_path, ["records", "check", str(rec)], names=f"{rec.name}:1",
             field="metrics.steps")


PARADL_CASES = [
    ("a duplicate column", lambda t: t.replace("s_per_iter_median\n", "s_per_iter_median,gpus\n")
     .replace("0.11\n", "0.11,2\n").replace("0.13\n", "0.13,8\n"), "gpus"),
    ("a 5,000-digit dimension", lambda t: t.replace("3x224x224,0.11", f"3x{BIG}x224,0.11"),
     "input_sample_shape"),
    ("a 4,000-digit integer", lambda t: t.replace("1,32,32,", f"1,32,{LONG},", 1), "global_batch"),
    ("a batch that is text", lambda t: t.replace("1,32,32,", "1,32,lots,", 1), "global_batch"),
    ("a 1e999 time", lambda t: t.replace("0.11", "1e999"), "s_per_iter_median"),
    ("a name with a control character", lambda t: t.replace("resnet50,data,1,", "res\x07,data,1,"),
     "model"),
]


@pytest.mark.parametrize("what, change, column", PARADL_CASES, ids=[c[0] for c in PARADL_CASES])
def test_a_broken_paradl_csv_is_refused_naming_the_column(tmp_path, what, change, column):
    csv = tmp_path / "m.csv"
    csv.write_text(change(CALIBRATION_CSV))
    assert csv.read_text() != CALIBRATION_CSV
    _refused(tmp_path, ["records", "import-paradl", str(csv), "-o", str(tmp_path / "r.jsonl")],
             names=csv.name, field=column)


# ------------------------------------------------------------ YAML over 4,300 digits

@pytest.mark.parametrize("kind", ["scenario", "system", "hpo"])
@pytest.mark.parametrize("value", [BIG, "9999-99-99", "0x" + "f" * 400])
def test_a_yaml_scalar_that_cannot_convert_names_its_key(tmp_path, kind, value):
    """Any YAML integer over 4,300 digits crashed the parser path of every YAML input;
    so did a date the resolver matches but no calendar has."""
    if kind == "scenario":
        text, args, key = SCENARIO.replace("nodes: 4", f"nodes: {value}"), ["simulate"], \
            "cluster.nodes"
    elif kind == "system":
        text, args, key = SYSTEM.replace("cpu_cores: 16", f"cpu_cores: {value}"), \
            ["oracle", "sweep", "--model", "alexnet", "--global-batch", "256", "--system"], \
            "node.cpu_cores"
    else:
        text, args, key = HPO_SCENARIO.replace("epoch_time: 1s", f"epoch_time: {value}"), \
            ["hpo", "simulate"], "hpo.epoch_time"
    path = tmp_path / "input.yaml"
    path.write_text(text)
    _refused(tmp_path, [*args, str(path)], names=path.name, field=key)


def test_a_grid_value_of_5000_digits_is_one_line(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    out = _refused(tmp_path, ["sweep", "s.yaml", "--grid", f"cluster.nodes={BIG}", "--store",
                              "s.db", "-q"], names="--grid cluster.nodes")
    assert len(out.stderr) < 600


# ------------------------------------------------------------------------------ HPO

HPO_CASES = [
    ("epochs 1e12", "epoch_time: 1s", "epoch_time: 1s\n  epochs: 1000000000000",
     "hpo.epochs", "space: {optimizer: [adam, sgd], batch_size: [32, 64], epochs: [2, 5]}",
     "space: {optimizer: [adam, sgd], batch_size: [32, 64]}"),
    ("epochs 1e12 in the space", "epochs: [2, 5]", "epochs: [2, 1000000000000]", "hpo.space.epochs",
     None, None),
    ("10^9 retries of 1 ns trials", "on_failure: retry",
     "on_failure: retry\n  max_retries: 1000000000\n  failures: {trial_mtbf: 1ns}",
     "hpo.max_retries", None, None),
    ("asha rungs of 1e12 epochs", "scheduler: fifo",
     "scheduler: asha\n  n_trials: 4\n  rungs: {max_epochs: 1000000000000}", "hpo.rungs",
     "space: {optimizer: [adam, sgd], batch_size: [32, 64], epochs: [2, 5]}",
     "space: {optimizer: [adam, sgd], batch_size: [32, 64]}"),
    ("an injection at trial 10^15", "on_failure: retry",
     "on_failure: retry\n  inject_failures: [{trial: 1000000000000000, at_epoch: 1}]",
     "hpo.inject_failures", None, None),
    ("a 1 ns node MTBF", "on_failure: retry", "on_failure: retry\n  failures: {nodes: true}",
     "failures.node_mtbf", "cluster: {nodes: 1, gpus_per_node: 4}",
     "cluster: {nodes: 1, gpus_per_node: 4}\nfailures: {node_mtbf: 1ms, distribution: "
     "exponential}"),
]


@pytest.mark.parametrize("what, old, new, field, old2, new2", HPO_CASES,
                         ids=[c[0] for c in HPO_CASES])
def test_an_hpo_sweep_that_cannot_finish_is_refused_naming_the_key(tmp_path, what, old, new,
                                                                     field, old2, new2):
    text = HPO_SCENARIO.replace(old, new)
    if old2 is not None:
        text = text.replace(old2, new2)
    path = tmp_path / "hpo.yaml"
    path.write_text(text)
    out = _refused(tmp_path, ["hpo", "simulate", str(path)], names=path.name, field=field)
    assert out.seconds < 10


def test_a_million_trials_that_all_fail_are_refused_from_the_closed_form(tmp_path):
    """Retries within the bound, but 10⁵ trials × 1000 retries of trials that fail at
    once: 10⁸ expected attempts, refused before the sweep runs."""
    path = tmp_path / "hpo.yaml"
    path.write_text(HPO_SCENARIO.replace("search: grid", "search: random\n  n_trials: 100000")
                    .replace("space: {optimizer: [adam, sgd], batch_size: [32, 64], epochs: "
                             "[2, 5]}", "space: {lr: {low: 0.001, high: 0.1}}\n  epochs: 3")
                    .replace("on_failure: retry", "on_failure: retry\n  max_retries: 1000\n"
                             "  failures: {trial_mtbf: 1ns}"))
    out = _refused(tmp_path, ["hpo", "simulate", str(path)], field="hpo.failures.trial_mtbf")
    assert "attempts" in out.stderr


HPO_TRACE_CASES = [
    ("a trial id of 10^15", '"trial":1}', '"trial":1000000000000000}', "trial"),
    ("epochs of 10^15", '"to_epoch":2,"trial":0', '"to_epoch":1000000000000000,"trial":0',
     "to_epoch"),
    ("an attempt of 10^15", '"attempt":0,"epoch":2', '"attempt":1000000000000000,"epoch":2',
     "attempt"),
    ("an event of another vocabulary", '"event":"job_end"', '"event":"trial_exploded"', "event"),
    ("a kind that is a list", '"event":"job_end"', '"event":["job_end"]', "event"),
    ("a config that is a list", '"config":{"lr":0.1}', '"config":[0.1]', "config"),
    ("a 5,000-digit seed", '"seed":0', f'"seed":{BIG}', "seed"),
]


@pytest.mark.parametrize("what, old, new, field", HPO_TRACE_CASES,
                         ids=[c[0] for c in HPO_TRACE_CASES])
def test_an_hpo_trace_of_huge_ids_answers_at_once(tmp_path, what, old, new, field):
    assert old in HPO_TRACE
    path = tmp_path / "trace.jsonl"
    path.write_text(HPO_TRACE.replace(old, new, 1))
    out = _refused(tmp_path, ["hpo", "replay", str(path)], names=path.name, field=field)
    assert out.seconds < 5


def test_an_hpo_trace_of_huge_epoch_spans_is_refused_before_deriving_them(tmp_path):
    head = HPO_TRACE.splitlines()[0] + "\n"
    body = "".join(
        f'{{"attempt":0,"event":"trial_start","from_epoch":0,"kind":"new","node":0,'
        f'"slots":[0],"t_s":0.0,"to_epoch":100000,"trial":{i}}}\n'
        f'{{"attempt":0,"epoch":100000,"event":"trial_end","status":"completed","t_s":2.0,'
        f'"trial":{i}}}\n' for i in range(120))
    path = tmp_path / "trace.jsonl"
    path.write_text(head + body)
    _refused(tmp_path, ["hpo", "replay", str(path)], names=path.name, field="to_epoch")


def test_the_event_kinds_of_a_trace_are_those_of_testbed_events():
    """Derived from the vocabulary, not a copy: every kind has a model, and a kind that
    is not in testbed.events has none."""
    from testbed import events as ev
    from testbed.hpo.trace import event_model
    models = {kind: event_model(kind) for kind in ev.EVENT_KINDS}
    assert len(models) == len(ev.EVENT_KINDS) >= 20
    for kind in each(ev.HPO_EVENT_KINDS):
        if kind != ev.NODE_UP:
            assert "trial" in models[kind].model_fields, kind


# ------------------------------------------------------------- checkpoint segments

SEGMENTS = SCENARIO.replace("compute_time: 48h", "compute_time: 100000h").replace(
    "cluster: {nodes: 4, spares: 1, repair: 2h}", "cluster: {nodes: 4, repair: 2h}").replace(
    "checkpoint: {policy: daly, cost: 2min, restart: 3min}",
    "checkpoint: {policy: fixed, interval: 1us, cost: 1us, restart: 3min}")


def test_ten_to_the_fifteen_checkpoint_segments_answer_from_the_closed_form(tmp_path):
    """3.6·10¹⁴ segments: the closed form made a list of them (MemoryError); now the fast
    engine answers in seconds, and the step-by-step engine and an event log, which
    would walk every segment, are refused naming the interval."""
    path = tmp_path / "s.yaml"
    path.write_text(SEGMENTS)
    out = run_bounded(["simulate", str(path), "-r", "2", "--json"], cwd=tmp_path)
    assert out.code == 0, out.stderr[-500:]
    assert json.loads(out.stdout)["analytical"]["wall_time_s"] > 3.6e8
    for extra in (["--engine", "simpy"], ["--events", "e.jsonl"]):
        _refused(tmp_path, ["simulate", str(path), "-r", "2", *extra],
                 field="checkpoint.interval")


def test_a_tiny_mtbf_is_refused_before_the_closed_form(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SEGMENTS.replace("node_mtbf: 5d", "node_mtbf: 1ms"))
    _refused(tmp_path, ["simulate", str(path)], field="failures.node_mtbf")


# ------------------------------------------------------------------------- .net files

def test_a_net_file_of_1_5_million_layers_answers_in_seconds(tmp_path):
    path = tmp_path / "big.net"
    with open(path, "w") as fh:
        fh.write("Dataset|ImageNet\nInput|1280000x3x8x8\nModel|Big\n")
        fh.writelines(f"RELU_{i}|3x8x8|3x3x0x0|3x8x8|0\n" for i in range(1_500_000))
    assert path.stat().st_size < 64 * 2**20          # under the input size limit
    out = _refused(tmp_path, ["model", "info", str(path)], names=path.name, field="layers")
    assert out.seconds < 10


def test_a_net_file_at_the_layer_limit_is_read_in_seconds(tmp_path):
    from testbed.model.netfile import MAX_LAYERS
    path = tmp_path / "deep.net"
    path.write_text("Input|1000x3x8x8\n" + "".join(f"RELU_{i}|3x8x8|3x3x0x0|3x8x8|0\n"
                                                   for i in range(MAX_LAYERS)))
    out = run_in_process(["model", "info", str(path), "--json"], cwd=tmp_path)
    assert out.code == 0 and out.seconds < 10, out.stderr
    assert json.loads(out.stdout)["layers"] == MAX_LAYERS


@pytest.mark.parametrize("dataset", ["Evil\nInput|1x1x1x1", "a|b", "x\r", "#comment", ""])
def test_export_refuses_a_header_injection(tmp_path, dataset):
    _refused(tmp_path, ["model", "export", "alexnet", "-o", str(tmp_path / "m.net"),
                        "--dataset", dataset], names="--dataset")


# ------------------------------------------------------------- traces and data sets

@pytest.mark.parametrize("start, stop", [("1e308", "1.7e308"), ("0", "1.7e308"),
                                         ("-1.7e308", "1.7e308"), ("inf", "inf"),
                                         ("1136080800", "1e400")])
def test_fta_import_never_writes_what_traces_check_refuses(tmp_path, start, stop):
    fta = tmp_path / "fta.tab"
    fta.write_text(f"1\t1\t101\t7\tn101\t0\t{start}\t{stop}\t1\n"
                   "2\t2\t102\t7\tn102\t0\t1136102400\t1136103300\t2\n")
    _refused(tmp_path, ["traces", "import-fta", str(fta), "-o", str(tmp_path / "t.csv")],
             names=fta.name, field="event_")


def test_what_fta_import_writes_traces_check_reads(tmp_path):
    fta = tmp_path / "fta.tab"
    fta.write_text("1\t1\t101\t7\tn101\t0\t0\t7000000000\t1\n"
                   "2\t2\t102\t7\tn102\t0\t1136102400\t1136103300\t2\n")
    assert run_in_process(["traces", "import-fta", str(fta), "-o", "t.csv"],
                          cwd=tmp_path).code == 0
    out = run_in_process(["traces", "check", "t.csv"], cwd=tmp_path)
    assert out.code == 0, out.stderr


def test_duplicate_columns_are_refused_by_every_csv_reader(tmp_path):
    (tmp_path / "t.csv").write_text("time_s,node,cause,node\n1h,1,a,2\n")
    _refused(tmp_path, ["traces", "check", "t.csv"], names="t.csv", field="node")
    (tmp_path / "d.csv").write_text(DATASET.replace("x1,x2,label", "x1,x1,label"))
    _refused(tmp_path, ["precision-study", "--dataset", "d.csv", "--target", "label",
                        "--precisions", "fp32", "--seeds", "1", "-q"], names="d.csv",
             field="x1")


# ----------------------------------------------------------------------------- stores

def test_a_refused_sweep_leaves_no_database(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    for workers in ("0", "-3"):
        _refused(tmp_path, ["sweep", "s.yaml", "--grid", "checkpoint.policy=fixed", "--grid", "checkpoint.interval=1h,2h", "-r", "2",
                            "--store", "new.db", "--workers", workers], names="--workers")


def _sweep_store(tmp: Path) -> Path:
    (tmp / "s.yaml").write_text(SCENARIO)
    out = run_in_process(["sweep", "s.yaml", "--grid", "checkpoint.policy=fixed", "--grid", "checkpoint.interval=1h,2h", "-r", "2",
                          "--store", "s.db", "-q", "--workers", "1"], cwd=tmp)
    assert out.code == 0, out.stderr
    return tmp / "s.db"


def test_reading_a_store_creates_no_side_files(tmp_path):
    db = _sweep_store(tmp_path)
    before = tree_state(tmp_path)
    for args in (["results", "export", "s.db", "-o", "out.csv"],
                 ["results", "export", "s.db", "-o", "out.csv", "--json"],
                 ["report", "s.db", "-o", "rep"]):
        out = run_in_process(args, cwd=tmp_path)
        assert out.code == 0, out.stderr
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    assert {k: v for k, v in tree_state(tmp_path).items() if k.startswith("s.db")} == \
        {k: v for k, v in before.items() if k.startswith("s.db")}


@pytest.mark.parametrize("sql", [
    "UPDATE sweeps SET grid_json='[[1,2,3]]'",
    "UPDATE sweeps SET grid_json='" + "[" * 5000 + "]" * 5000 + "'",
    "UPDATE sweep_points SET params_json='[1]'",
    "UPDATE sweep_points SET facts_json='{\"levels\": [{\"x\": 1}]}'",
    "UPDATE sweep_points SET facts_json='{\"work_s\": 1e999}'",
    "UPDATE sweep_points SET seed='x'",
    "UPDATE results SET wall_s='fast'",
])
def test_a_store_changed_behind_the_testbeds_back_is_one_line(tmp_path, sql):
    """The store is a file the commands read: its JSON columns go through the boundary
    and their schemas, its numbers are checked."""
    db = _sweep_store(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute(sql)
    conn.commit()
    conn.close()
    out = _refused(tmp_path, ["report", "s.db", "-o", "rep"], names="s.db")
    assert "damaged results database" in out.stderr
    if "results" not in sql and "seed" not in sql and "facts" not in sql:
        _refused(tmp_path, ["results", "export", "s.db", "-o", "x.csv"], names="s.db")


def test_a_full_disk_during_a_sweep_is_one_line_and_the_store_stays_consistent(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    grid = ",".join(f"{h}h" for h in range(1, 9))
    out = run_bounded(["sweep", "s.yaml", "--grid", "checkpoint.policy=fixed", "--grid", f"checkpoint.interval={grid}", "-r", "300",
                       "--store", "s.db", "-q", "--workers", "1"], cwd=tmp_path,
                      fsize_bytes=300_000, timeout=120)
    assert out.code == 1, out.stderr[-1000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out.stderr and "s.db" in lines[0], out.stderr
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    points, rows = (db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                    for t in ("points", "results"))
    assert points < 8 and rows == 300 * points           # whole points only
    db.close()
    resumed = run_bounded(["sweep", "s.yaml", "--grid", "checkpoint.policy=fixed", "--grid", f"checkpoint.interval={grid}", "-r",
                           "300", "--store", "s.db", "-q", "--workers", "1"], cwd=tmp_path,
                          timeout=120)
    assert resumed.code == 0, resumed.stderr[-1000:]


def test_two_sweeps_creating_one_new_store_at_once_both_succeed(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "testbed", "sweep", "s.yaml", "--grid",
            "checkpoint.policy=fixed", "--grid", "checkpoint.interval=1h,2h,3h", "-r", "2", "--store", "new.db", "-q",
            "--workers", "1"]
    procs = [subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(each(procs), results, strict=True):
        assert p.returncode == 0, err[-1000:]
    db = sqlite3.connect(tmp_path / "new.db")
    assert db.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 3
    db.close()


# ------------------------------------------------------------- run, --allow-code

def test_run_in_a_folder_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    before = tree_state(tmp_path)
    out = run_in_process(["run", str(tmp_path / "s.yaml"), "-r", "2"], cwd=Path("/proc/self"))
    assert_refused(out, names="report")
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("policy", ["boom", "text", "nothing", "foreign"])
def test_a_policy_that_raises_or_answers_nonsense_is_one_line(tmp_path, policy):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("cluster: {nodes: 4, spares: 1, repair: 2h}",
                                     "cluster: {nodes: 8, spares: 2, repair: 2h, host_selection: "
                                     f"'tests.hostile.policies:{policy}'}}").replace(
        "node_mtbf: 5d", "node_mtbf: 1d"))
    _refused(tmp_path, ["--allow-code", "simulate", str(path), "-r", "2"], names=path.name,
             field="cluster.host_selection")


# ------------------------------------------------------------------- real-run options

@pytest.mark.parametrize("option, value", [
    ("--steps", "100000000000000000000"), ("--steps", "1000000001"), ("--steps", "0"),
    ("--checkpoint-every", "99999999999999"), ("--keep", "0"), ("--keep", "100000"),
    ("--max-kills", "-1"), ("--max-kills", "10000000"), ("--batch-size", "1000000000000"),
])
def test_real_run_options_beyond_the_records_ranges_are_refused(tmp_path, option, value):
    args = ["real-run", "train", "--framework", "torch", "--steps", "3", "--ckpt-dir",
            str(tmp_path / "ck")]
    args = args[:4] + [value] + args[5:] if option == "--steps" else args + [option, value]
    out = _refused(tmp_path, args, names=option)
    assert out.seconds < 5
    assert not (tmp_path / "ck").exists()


@pytest.mark.parametrize("target", ["/dev/full", "/dev/null", "missing/t.jsonl"])
def test_a_refused_timeline_leaves_no_checkpoint_folder(tmp_path, target):
    _refused(tmp_path, ["real-run", "train", "--framework", "torch", "--steps", "3",
                        "--ckpt-dir", str(tmp_path / "ck"), "--timeline", target],
             names=target.split("/")[0] or target)
    assert not (tmp_path / "ck").exists()


def test_a_refused_kill_trace_leaves_no_checkpoint_folder(tmp_path):
    (tmp_path / "k.jsonl").write_text('{"at_step": "five"}\n')
    _refused(tmp_path, ["real-run", "train", "--framework", "torch", "--steps", "3",
                        "--ckpt-dir", str(tmp_path / "ck"), "--kill-trace", "k.jsonl"],
             names="k.jsonl", field="at_step")
    assert not (tmp_path / "ck").exists()


# ------------------------------------------------------------- checkpoint manifests

def _committed(root: Path) -> Path:
    """A checkpoint folder with one committed checkpoint of torch/mlp (written by the
    store itself, no framework needed)."""
    from real_runs.ckpt_store import CheckpointStore
    store = CheckpointStore(root, "torch", "mlp")
    tmp = store.begin(2)
    (tmp / "state.json").write_text('{"step": 2}')
    return store.commit(tmp, 2).path / "MANIFEST.json"


def _manifest(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


MANIFEST_CASES = {
    "fifo": lambda m: (m.unlink(), os.mkfifo(m)),
    "dev-zero": lambda m: (m.unlink(), m.symlink_to("/dev/zero")),
    "folder": lambda m: (m.unlink(), m.mkdir()),
    "deep": lambda m: m.write_text("[" * 100_000 + "]" * 100_000),
    "deep-object": lambda m: m.write_text('{"a":' * 100_000 + "1" + "}" * 100_000),
    "over-16MiB": lambda m: m.write_text(" " * (17 * 2**20) + "{}"),
    "not-json": lambda m: m.write_text("{truncated"),
    "escapes": lambda m: _manifest(m, lambda d: d.__setitem__(
        "files", {"../../etc/passwd": {"sha256": "0" * 64, "bytes": 1}})),
    "absolute": lambda m: _manifest(m, lambda d: d.__setitem__(
        "files", {"/etc/passwd": {"sha256": "0" * 64, "bytes": 1}})),
    "huge-bytes": lambda m: _manifest(m, lambda d: next(iter(d["files"].values())).__setitem__(
        "bytes", 10**30)),
    "huge-step": lambda m: _manifest(m, lambda d: d.__setitem__("step", int(BIG[:200]))),
    "step-is-text": lambda m: _manifest(m, lambda d: d.__setitem__("step", "two")),
    "files-a-list": lambda m: _manifest(m, lambda d: d.__setitem__("files", ["state.json"])),
    "bad-sha": lambda m: _manifest(m, lambda d: next(iter(d["files"].values())).__setitem__(
        "sha256", "xyz")),
    "framework-a-list": lambda m: _manifest(m, lambda d: d.__setitem__("framework", ["torch"])),
}


@pytest.mark.parametrize("case", sorted(MANIFEST_CASES))
def test_a_hostile_manifest_is_refused_before_the_run_and_left_as_it_was(tmp_path, case):
    manifest = _committed(tmp_path / "ck")
    MANIFEST_CASES[case](manifest)
    _refused(tmp_path, ["real-run", "train", "--framework", "torch", "--steps", "3",
                        "--checkpoint-every", "1", "--ckpt-dir", "ck"], names="MANIFEST.json",
             bounded=case in ("fifo", "dev-zero", "deep", "deep-object", "over-16MiB"))


def test_the_store_skips_a_hostile_manifest_during_a_run():
    """Inside a run (after the checks), a damaged manifest is a reason to fall back to an
    older checkpoint, never an exception."""
    import tempfile

    from real_runs.ckpt_store import CheckpointStore
    with tempfile.TemporaryDirectory() as tmp:
        store = CheckpointStore(tmp, "torch", "mlp")
        for step in (1, 2):
            t = store.begin(step)
            (t / "state.json").write_text(f'{{"step": {step}}}')
            store.commit(t, step)
        newest = store.committed()[-1].path / "MANIFEST.json"
        newest.unlink()
        newest.symlink_to("/dev/zero")
        seen = []
        entry = store.latest_valid(lambda e, why: seen.append(why))
        assert entry is not None and entry.step == 1
        assert len(seen) == 1 and "not a regular file" in seen[0]


# ----------------------------------------------------------- the supervisor's worker

def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.frameworks
def test_the_training_worker_dies_with_its_supervisor(tmp_path):
    """SIGKILL of the supervisor left the worker training on; now the kernel kills it
    (PR_SET_PDEATHSIG, as for sweep and HPO workers)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    sup = subprocess.Popen([sys.executable, "-m", "testbed", "real-run", "train", "--framework",
                            "torch", "--steps", "1000000", "--checkpoint-every", "100000",
                            "--ckpt-dir", str(tmp_path / "ck")], cwd=tmp_path, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not workers and time.monotonic() < deadline and sup.poll() is None:
            time.sleep(0.02)
            workers = _children(sup.pid)
        assert workers, "the supervisor started no worker"
        # killed while the worker still imports its framework (seconds of torch): it
        # would live on until it first writes to the closed pipe, or train on when paused
        sup.send_signal(signal.SIGKILL)
        sup.wait(timeout=10)
        deadline = time.monotonic() + 1.0
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(_alive(w) for w in workers), "the worker outlived its supervisor"
    finally:
        if sup.poll() is None:
            sup.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
