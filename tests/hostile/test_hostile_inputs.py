"""Hostile inputs to every command that reads a file: one clear line, exit 2, nothing
changed, an answer in seconds within bounded memory.

Parametrised over every kind of input file (scenario, system profile, failure trace,
FTA table, cause table, calibration CSV, ParaDL ``.net``) × every command that reads
it × every way of breaking it (see :mod:`tests.hostile.cases`), plus the special files
(FIFO, device, folder, a file over the size limit) and a hypothesis fuzzer in
:mod:`tests.hostile.test_fuzz`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hostile.cases import (
    BYTE_MUTATIONS,
    CSV_MUTATIONS,
    HPO_TRACE,
    HPO_TRACE_VALUES,
    KINDS,
    READERS,
    REFERRING_SCENARIO,
    SCENARIO,
    SCENARIO_VALUES,
    SUFFIX,
    SYSTEM,
    SYSTEM_VALUES,
    YAML_MUTATIONS,
)
from tests.hostile.harness import (
    REPO,
    assert_refused,
    run_bounded,
    run_in_process,
    tree_state,
)


def _valid_net(tmp: Path) -> bytes:
    from testbed.model.netfile import export_net
    from testbed.model.registry import get_model
    return export_net(get_model("alexnet")).encode()


def _valid_records() -> bytes:
    """One real measurement record (the committed calibration set of this machine)."""
    path = REPO / "traces" / "measurements" / "vm" / "fit.jsonl"
    return path.read_text().splitlines()[0].encode() + b"\n"


def _valid(kind: str, tmp: Path) -> bytes:
    if kind == "net":
        return _valid_net(tmp)
    if kind == "records":
        return _valid_records()
    return KINDS[kind].encode()


def _commands(kind: str, path: Path, tmp: Path) -> list[list[str]]:
    """The readers of ``kind`` with the file and output folder filled in."""
    out = []
    for template in READERS[kind]:
        args = []
        for a in template:
            if a == "{ref}":
                ref = tmp / f"refers-{kind}.yaml"
                ref.write_text(REFERRING_SCENARIO[kind].format(f=path))
                a = str(ref)
            args.append(a.replace("{f}", str(path)).replace("{out}", str(tmp / "out")))
        out.append(args)
    return out


def _check(tmp: Path, path: Path, commands: list[list[str]], *, names: str | None = None,
           field: str | None = None, bounded: bool = False, env: dict | None = None) -> None:
    """Run each command; the promise holds and nothing under ``tmp`` changes."""
    (tmp / "out").mkdir(exist_ok=True)
    before = tree_state(tmp)
    for args in commands:
        if bounded:
            outcome = run_bounded(args, cwd=tmp, extra_env=env)
        else:
            saved = {k: os.environ.get(k) for k in (env or {})}
            os.environ.update(env or {})
            try:
                outcome = run_in_process(args, cwd=tmp)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        assert_refused(outcome, names=names if names is not None else path.name, field=field)
        assert tree_state(tmp) == before, f"{args} changed files"


KIND_NAMES = sorted(READERS)


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("mutation", sorted(BYTE_MUTATIONS))
def test_byte_level_breakage(tmp_path, kind, mutation):
    path = tmp_path / f"input{SUFFIX[kind]}"
    path.write_bytes(BYTE_MUTATIONS[mutation](_valid(kind, tmp_path)))
    _check(tmp_path, path, _commands(kind, path, tmp_path))


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("special", ["fifo", "device", "folder", "missing"])
def test_special_files_are_refused_without_blocking(tmp_path, kind, special):
    path = tmp_path / f"input{SUFFIX[kind]}"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "device":
        path.symlink_to("/dev/zero")
    elif special == "folder":
        path.mkdir()
    _check(tmp_path, path, _commands(kind, path, tmp_path))


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_file_over_the_size_limit_is_refused_and_the_limit_can_be_raised(tmp_path, kind):
    path = tmp_path / f"input{SUFFIX[kind]}"
    path.write_bytes(b"#" * 6000 + b"\n" + _valid(kind, tmp_path))
    commands = _commands(kind, path, tmp_path)
    _check(tmp_path, path, commands, env={"TESTBED_MAX_INPUT_BYTES": "4KiB"})
    out = run_in_process(["--max-input-size", "4KiB", *commands[0]], cwd=tmp_path)
    assert_refused(out, names=path.name)
    out = run_in_process(["--max-input-size", "0", *commands[0]], cwd=tmp_path)
    assert_refused(out, names="--max-input-size")


@pytest.mark.parametrize("kind", ["scenario", "system", "hpo"])
@pytest.mark.parametrize("mutation", sorted(YAML_MUTATIONS))
def test_yaml_level_breakage(tmp_path, kind, mutation):
    path = tmp_path / f"input{SUFFIX[kind]}"
    path.write_text(YAML_MUTATIONS[mutation](KINDS[kind]))
    commands = _commands(kind, path, tmp_path)
    bounded = mutation in ("alias-bomb", "deep-nesting")
    _check(tmp_path, path, commands[:2] if bounded else commands, bounded=bounded)
    assert not (tmp_path / "pwned").exists()


def _set_value(text: str, key: str, value: str) -> str:
    section, name = key.split(".")
    lines = []
    for line in text.splitlines():
        if line.startswith(f"{section}:"):
            inner = line[len(section) + 2:].strip().strip("{}")
            items = dict(item.split(": ", 1) for item in inner.split(", "))
            items[name] = value
            line = f"{section}: {{" + ", ".join(f"{k}: {v}" for k, v in items.items()) + "}"
        lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("key, value", SCENARIO_VALUES)
def test_nonsense_scenario_values_name_the_field(tmp_path, key, value):
    path = tmp_path / "input.yaml"
    path.write_text(_set_value(SCENARIO, key, value))
    _check(tmp_path, path, _commands("scenario", path, tmp_path)[:1], field=key)


@pytest.mark.parametrize("old, new", SYSTEM_VALUES)
def test_nonsense_profile_values_are_refused(tmp_path, old, new):
    path = tmp_path / "input.yaml"
    assert old in SYSTEM
    path.write_text(SYSTEM.replace(old, new, 1))
    _check(tmp_path, path, _commands("system", path, tmp_path))


@pytest.mark.parametrize("kind, mutation", [(k, m) for k, muts in sorted(CSV_MUTATIONS.items())
                                            for m in sorted(muts)])
def test_csv_level_breakage(tmp_path, kind, mutation):
    path = tmp_path / f"input{SUFFIX[kind]}"
    path.write_text(CSV_MUTATIONS[kind][mutation](KINDS[kind]))
    _check(tmp_path, path, _commands(kind, path, tmp_path))


@pytest.mark.parametrize("old, new, field", HPO_TRACE_VALUES)
def test_nonsense_hpo_trace_fields_name_the_line_and_field(tmp_path, old, new, field):
    """Every field a summary or a replay reads is checked by event kind."""
    path = tmp_path / "input.jsonl"
    assert old in HPO_TRACE
    path.write_text(HPO_TRACE.replace(old, new, 1))
    _check(tmp_path, path, _commands("hpo_trace", path, tmp_path), field=field)


def test_the_valid_hpo_trace_replays(tmp_path):
    path = tmp_path / "input.jsonl"
    path.write_text(HPO_TRACE)
    out = run_in_process(["hpo", "replay", str(path)], cwd=tmp_path)
    assert out.code == 0 and "makespan error: +0.00%" in out.stdout, out.stderr


def test_unbounded_reads_stay_bounded_in_a_subprocess(tmp_path):
    """/dev/zero and an alias bomb against a real process with 3 GiB of address space."""
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(YAML_MUTATIONS["alias-bomb"](SCENARIO))
    for path in (zero, bomb):
        _check(tmp_path, path, [["simulate", str(path)]], bounded=True)


@pytest.mark.parametrize("args", [
    ["sweep", "{f}", "--grid", "checkpoint.policy=fixed", "--grid", "checkpoint.interval=1h,2h", "-r", "2", "--store",
     "{out}/s.db", "--executor", "mpi"],
    ["hpo", "run", "{hpo}", "--store", "{out}/h.db", "--executor", "mpi"],
])
def test_the_mpi_executor_outside_an_mpi_launch_is_one_line(tmp_path, args):
    """Without mpiexec, mpi4py.futures would try to spawn its workers and hang: refused
    before any work, in a bounded subprocess without the launcher's variables."""
    scenario, hpo = tmp_path / "input.yaml", tmp_path / "hpo.yaml"
    scenario.write_text(SCENARIO)
    hpo.write_text(KINDS["hpo"])
    (tmp_path / "out").mkdir()
    from testbed.app.sweep.executors import MPI_LAUNCH_VARS
    assert not any(v in os.environ for v in MPI_LAUNCH_VARS), "the suite runs outside mpiexec"
    filled = [a.replace("{f}", str(scenario)).replace("{hpo}", str(hpo))
              .replace("{out}", str(tmp_path / "out")) for a in args]
    before = tree_state(tmp_path)
    outcome = run_bounded(filled, cwd=tmp_path)
    assert_refused(outcome, names="--executor mpi")
    assert "mpiexec" in outcome.stderr
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("kind, field", [("system", "system"), ("trace", "failures.trace"),
                                         ("causes", "failures.causes")])
def test_a_special_file_a_scenario_refers_to_names_the_scenarios_key(tmp_path, kind, field):
    path = tmp_path / f"input{SUFFIX[kind]}"
    os.mkfifo(path)
    ref = [args for args in _commands(kind, path, tmp_path) if "refers" in " ".join(args)]
    assert ref, kind
    _check(tmp_path, path, ref, field=field)
