"""A fuzzer per file kind, generated from the schemas (issue 20).

For each kind of file a command reads — measurement records, supervised-run timelines,
kill traces, HPO schedule traces, checkpoint manifests, the ParaDL CSV, failure traces,
FTA tables, ``.net`` files — the fuzzer takes a valid example and the pydantic model that
validates it, enumerates the model's fields (nested models included, and the optional
fields the example leaves out), and lets hypothesis replace, delete or add one of them
with a hostile value: another type, an extreme, text where a number belongs, a number
JSON cannot hold in a float (``1e999``), an integer of thousands of digits, a line
break, an unknown key. Whatever comes out, the command answers with exit 0 or with exit
2 and at most three lines naming the file — never a traceback — the input is unchanged,
and the answer comes in seconds.

``TESTBED_FUZZ_EXAMPLES`` raises the examples per kind for a longer campaign (the suite
runs :data:`EXAMPLES` of each).
"""

from __future__ import annotations

import json
import os
import types
import typing
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tests.hostile.cases import CALIBRATION_CSV, FTA, HPO_TRACE, REPLAY_PROFILE, TIMELINE, TRACE
from tests.hostile.harness import REPO, run_in_process

#: Inputs per file kind in the suite (a campaign: TESTBED_FUZZ_EXAMPLES=2000).
EXAMPLES = int(os.environ.get("TESTBED_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
RAW = "\x00RAW\x00"          # a placeholder replaced by raw JSON text after encoding
#: Hostile JSON values, by what they attack.
JUNK: list[Any] = [
    None, True, False, 0, -1, 1, 2**63, -(2**63), 10**30, int("9" * 99), 0.5, -0.0, 1e-300,
    1e300, -1e300, "", " ", "five", "1e999", "9" * 5000, "a\nb", "tab\there", "\x07",
    "x" * 1001, "9999-99-99T99:99:99Z", "2020-02-30T00:00:00Z", "../../etc/passwd",
    "/dev/zero", "0" * 64, "f" * 64, [], [1, 2, 3], ["x"], [[[[]]]], {}, {"a": 1},
    {"at_step": 1}, [None], "NaN", "inf",
]
#: Raw JSON texts no Python value encodes: overflowing floats, huge integers, deep lists.
RAW_JUNK = ["1e999", "-1e999", "9" * 5000, "-" + "9" * 4301, "1" + "0" * 400 + ".5",
            "[" * 100 + "]" * 100, '"' + "y" * 5000 + '"']


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models named inside a type annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    if typing.get_origin(annotation) is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def schema_paths(model: type[BaseModel], data: dict, prefix: tuple = ()) -> list[tuple]:
    """Every key path the model defines under ``data``: the fields there, the optional
    fields left out, and the same inside nested models (lists of models by index)."""
    paths: list[tuple] = []
    for name, info in model.model_fields.items():
        path = prefix + (name,)
        paths.append(path)
        value = data.get(name)
        for inner in _models_in(info.annotation):
            if isinstance(value, dict):
                paths += schema_paths(inner, value, path)
            elif isinstance(value, list):
                for i, item in enumerate(value[:3]):
                    if isinstance(item, dict):
                        paths += schema_paths(inner, item, path + (i,))
    return paths


@st.composite
def mutated(draw, model: type[BaseModel], data: dict) -> str:
    """One hostile mutation of ``data`` (a JSON object) along the model's fields, as
    JSON text."""
    doc = json.loads(json.dumps(data))
    paths = schema_paths(model, doc)
    path = draw(st.sampled_from(paths))
    op = draw(st.sampled_from(["set", "set", "set", "raw", "delete", "unknown"]))
    node: Any = doc
    for part in path[:-1]:
        node = node[part] if isinstance(node, list) or part in node else node.setdefault(part, {})
        if not isinstance(node, (dict, list)):
            break
    last = path[-1]
    if isinstance(node, dict):
        if op == "delete":
            node.pop(last, None)
        elif op == "unknown":
            node[draw(st.sampled_from(["colour", last + "_", "x" * 300]))] = 1
        elif op == "raw":
            node[last] = RAW
        else:
            node[last] = draw(st.sampled_from(JUNK) | st.integers() | st.floats(
                allow_nan=False, allow_infinity=False) | st.text(max_size=20))
    text = json.dumps(doc)
    if RAW in text:
        text = text.replace(json.dumps(RAW), draw(st.sampled_from(RAW_JUNK)))
    return text


def _check(tmp: Path, path: Path, content: bytes, args: list[str]) -> None:
    """The promise of every reader: exit 0, or exit 2 in a few lines naming the file;
    the input unchanged; an answer in seconds."""
    out = run_in_process(args, cwd=tmp)
    assert out.code in (0, 2), (args, out.code, out.stderr[-1500:])
    assert "Traceback" not in out.stderr, out.stderr[-1500:]
    if out.code == 2:
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert 1 <= len(lines) <= 3, out.stderr
        assert "Error:" not in out.stderr.replace("error:", ""), out.stderr
    assert path.read_bytes() == content
    assert out.seconds < 30


def _lines_fuzz(tmp: Path, data, lines: list[dict], pick, suffix: str, args) -> None:
    """Mutate one line of a JSON-lines file (its model chosen by ``pick``) and check."""
    i = data.draw(st.integers(0, len(lines) - 1))
    text = data.draw(mutated(pick(lines[i]), lines[i]))
    body = "".join((text if j == i else json.dumps(rec)) + "\n" for j, rec in enumerate(lines))
    path = tmp / f"input{suffix}"
    path.write_text(body)
    _check(tmp, path, path.read_bytes(), [a.replace("{f}", str(path)) for a in args])


# ------------------------------------------------------------------------ records

def _records() -> list[dict]:
    """One valid record of every kind (the real train_summary of this machine's
    calibration set, and the others built on its environment)."""
    from testbed.measurements import make_record, record_dict
    first = json.loads((REPO / "traces" / "measurements" / "vm" / "fit.jsonl")
                       .read_text().splitlines()[0])
    env, cfg = first["env"], first["config"]
    kill = {"at_step": 3}
    built = [
        make_record("collective", env=env, op="allreduce", backend="gloo", processes=2,
                    metrics={"message_bytes": 64, "time_s": 1e-4}),
        make_record("checkpoint", env=env, framework="torch", format="harness", model="mlp",
                    parameters=100, metrics={"ckpt_bytes": 900, "state_bytes": 800,
                                             "save_s": 0.01}),
        make_record("restart", env=env, framework="torch", model="mlp", incarnation=1,
                    metrics={"restart_s": 2.0, "process_start_s": 0.1, "setup_s": 1.5,
                             "load_s": 0.01, "first_step_s": 0.01}),
        make_record("supervised_run", env=env, config=cfg, steps=8, checkpoint_every=4,
                    kills=[kill], metrics={"wall_time_s": 7.0, "kills": 1, "restarts": 1,
                                           "lost_steps": 2, "checkpoints_committed": 2},
                    timeline=[json.loads(line) for line in TIMELINE.splitlines()]),
        make_record("train_step", env=env, config=cfg, step=1, metrics={"step_s": 1e-3}),
    ]
    return [first] + [record_dict(r) for r in built]


def _record_model(rec: dict) -> type[BaseModel]:
    from testbed.measurements import parse_record
    return type(parse_record(rec, source="<fuzz>"))


@FUZZ
@given(data=st.data())
def test_fuzz_measurement_records(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("fz")
    _lines_fuzz(tmp, data, _records(), _record_model, ".jsonl", ["records", "check", "{f}"])


# ---------------------------------------------------------------------- timelines

@FUZZ
@given(data=st.data())
def test_fuzz_supervised_run_timelines(tmp_path_factory, data):
    from testbed.measurements import TimelineEvent
    tmp = tmp_path_factory.mktemp("fz")
    lines = [json.loads(line) for line in TIMELINE.splitlines()]
    _lines_fuzz(tmp, data, lines, lambda _: TimelineEvent, ".jsonl",
                ["simulate", "--replay-run", "{f}", "--system", REPLAY_PROFILE])


# -------------------------------------------------------------------- kill traces

@FUZZ
@given(data=st.data())
def test_fuzz_kill_traces(tmp_path_factory, data):
    """A valid trace reaches the checkpoint-folder check, which refuses the trace file
    itself as a folder (so no framework run starts)."""
    from testbed.measurements import Kill
    tmp = tmp_path_factory.mktemp("fz")
    lines = [{"at_step": 2}, {"during_checkpoint": True}, {"at_s": 1.5, "damage": "bitflip"}]
    _lines_fuzz(tmp, data, lines, lambda _: Kill, ".jsonl",
                ["real-run", "train", "--framework", "torch", "--steps", "4",
                 "--kill-trace", "{f}", "--ckpt-dir", "{f}"])


# ------------------------------------------------------------------- HPO traces

@FUZZ
@given(data=st.data())
def test_fuzz_hpo_schedule_traces(tmp_path_factory, data):
    from testbed.hpo.trace import event_model
    tmp = tmp_path_factory.mktemp("fz")
    lines = [json.loads(line) for line in HPO_TRACE.splitlines()]
    _lines_fuzz(tmp, data, lines, lambda rec: event_model(rec["event"]), ".jsonl",
                ["hpo", "replay", "{f}"])


# ------------------------------------------------------------ checkpoint manifests

@FUZZ
@given(data=st.data())
def test_fuzz_checkpoint_manifests(tmp_path_factory, data):
    """A manifest that survives the mutation is of another framework than the run asks
    for: refused too, so no framework run starts."""
    from real_runs.ckpt_store import CheckpointStore, Manifest
    tmp = tmp_path_factory.mktemp("fz")
    store = CheckpointStore(tmp / "ck", "torch", "mlp")
    t = store.begin(2)
    (t / "state.json").write_text('{"step": 2}')
    manifest = store.commit(t, 2).path / "MANIFEST.json"
    text = data.draw(mutated(Manifest, json.loads(manifest.read_text())))
    manifest.write_text(text)
    _check(tmp, manifest, manifest.read_bytes(),
           ["real-run", "train", "--framework", "chainer", "--steps", "3", "--ckpt-dir",
            str(tmp / "ck")])


# ------------------------------------------------------------------ CSV kinds

@st.composite
def csv_mutated(draw, model: type[BaseModel], text: str, delimiter: str = ",") -> str:
    """One cell, column name or row of a CSV replaced along the model's fields: a
    column named by the schema gets a hostile cell, is renamed, duplicated or dropped."""
    rows = [line.split(delimiter) for line in text.splitlines()]
    header = rows[0]
    columns = [c for c in model.model_fields if c in header]
    col = header.index(draw(st.sampled_from(columns)))
    op = draw(st.sampled_from(["cell", "cell", "cell", "duplicate", "drop", "rename"]))
    if op == "cell":
        r = draw(st.integers(1, len(rows) - 1))
        cell = draw(st.sampled_from([str(v) for v in JUNK if not isinstance(v, (list, dict))]
                                    + RAW_JUNK + ["nan", "-inf", "1e-400", "0x10", "1_000",
                                                  '"quoted', "a,b", "１２"]))
        rows[r][col] = cell.replace("\n", " ").replace(delimiter, " ")
    elif op == "duplicate":
        for row in rows:
            row.append(row[col])
    elif op == "drop":
        for row in rows:
            del row[col]
    else:
        header[col] = draw(st.sampled_from(["", header[col].upper(), header[col] + " ",
                                            header[(col + 1) % len(header)]]))
    return "\n".join(delimiter.join(r) for r in rows) + "\n"


@FUZZ
@given(data=st.data())
def test_fuzz_paradl_csv(tmp_path_factory, data):
    from testbed.calibration.records import ParadlRow
    tmp = tmp_path_factory.mktemp("fz")
    path = tmp / "input.csv"
    path.write_text(data.draw(csv_mutated(ParadlRow, CALIBRATION_CSV)))
    _check(tmp, path, path.read_bytes(),
           ["records", "import-paradl", str(path), "-o", str(tmp / "r.jsonl")])


@FUZZ
@given(data=st.data())
def test_fuzz_failure_traces(tmp_path_factory, data):
    from testbed.traces import TraceRecord
    tmp = tmp_path_factory.mktemp("fz")
    path = tmp / "input.csv"
    path.write_text(data.draw(csv_mutated(TraceRecord, TRACE)))
    _check(tmp, path, path.read_bytes(), ["traces", "check", str(path)])


@FUZZ
@given(data=st.data())
def test_fuzz_fta_tables(tmp_path_factory, data):
    from testbed.traces import FTA_COLUMNS, FtaEvent
    tmp = tmp_path_factory.mktemp("fz")
    path = tmp / "input.tab"
    text = "\t".join(FTA_COLUMNS) + "\n" + FTA
    path.write_text(data.draw(csv_mutated(FtaEvent, text, "\t")))
    _check(tmp, path, path.read_bytes(),
           ["traces", "import-fta", str(path), "-o", str(tmp / "t.csv")])


# ---------------------------------------------------------------------- .net files

#: The fields of a ``.net`` layer record (``name|x|w|y|t``) and of its header lines.
NET_FIELDS = ("name", "x", "w", "y", "t")


@FUZZ
@given(data=st.data())
def test_fuzz_net_files(tmp_path_factory, data):
    from testbed.model.netfile import export_net
    from testbed.model.registry import get_model
    tmp = tmp_path_factory.mktemp("fz")
    lines = [line.split("|") for line in export_net(get_model("alexnet")).splitlines()]
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(0, len(lines[i]) - 1))
    junk = data.draw(st.sampled_from(["", "x", "-3", "0", "3x0x7", "9" * 5000, "1e999", "nan",
                                      "3x" + "9" * 40, "x:3x3", "3×3", "|", "#", "CONV_9",
                                      "1" * 2000 + "x1"]) | st.text(max_size=12))
    lines[i][j] = junk.replace("\n", " ")
    if data.draw(st.booleans()):
        lines[i].append(data.draw(st.sampled_from(["", "1", "extra"])))
    path = tmp / "input.net"
    path.write_text("\n".join("|".join(parts) for parts in lines) + "\n")
    _check(tmp, path, path.read_bytes(), ["model", "info", str(path)])
