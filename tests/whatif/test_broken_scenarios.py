"""Broken scenario files give one error line with the file, the line and the key path.

Hypothesis writes scenario files with one defect each — a YAML syntax error, an
unknown key (a typo of a real one, which must get a did-you-mean), a value of the
wrong type, a value in the wrong unit, a value out of range, a referenced file that
does not exist — and feeds them to the loader (``load_scenario`` and the resolution
the simulator needs) and to the CLI (``testbed simulate``, in process and, for one
example of each kind, as a real subprocess). Every one must raise a typed input
error whose one-line message names the file, the line of the defect where the YAML
can tell it, and the key path; the CLI must exit 2 without a traceback.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.errors import InputError
from tests.whatif.conftest import REPO, env

#: A valid scenario as (section, [(key, value text)]); "" is the top level.
BASE = [
    ("", [("name", "hyp")]),
    ("workload", [("compute_time", "24h")]),
    ("cluster", [("nodes", "4"), ("spares", "1"), ("repair", "2h")]),
    ("failures", [("distribution", "exponential"), ("node_mtbf", "48h"), ("detect", "1min"),
                  ("restart", "5min")]),
    ("checkpoint", [("policy", "fixed"), ("interval", "1h"), ("cost", "5min"),
                    ("restart", "10min")]),
    ("simulation", [("replications", "3"), ("seed", "1")]),
]
DURATIONS = [("workload", "compute_time"), ("cluster", "repair"), ("failures", "node_mtbf"),
             ("failures", "detect"), ("failures", "restart"), ("checkpoint", "interval"),
             ("checkpoint", "cost"), ("checkpoint", "restart")]
POSITIVE_DURATIONS = [("workload", "compute_time"), ("failures", "node_mtbf"),
                      ("checkpoint", "interval"), ("checkpoint", "cost")]
INTEGERS = {("cluster", "nodes"): 1, ("cluster", "spares"): 0,
            ("simulation", "replications"): 1, ("simulation", "seed"): 0}
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def render(sections, replace=None, extra=None) -> tuple[str, dict[tuple[str, str], int]]:
    """YAML text of ``sections`` with one value replaced or one key added; key → line."""
    lines: list[str] = []
    where: dict[tuple[str, str], int] = {}
    for section, items in sections:
        items = list(items)
        if extra and extra[0] == section:
            items.append(extra[1:])
        if section:
            lines.append(f"{section}:")
        for key, text in items:
            if replace and replace[:2] == (section, key):
                text = replace[2]
            lines.append(f"{'  ' if section else ''}{key}: {text}")
            where[(section, key)] = len(lines)
    return "\n".join(lines) + "\n", where


def field_of(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


def load(path: Path):
    """What the simulator does with a file: validate it, then resolve it."""
    from testbed.app.resolve import resolve
    from testbed.scenario.schema import load_scenario
    return resolve(load_scenario(path))


def cli_in_process(path: Path) -> tuple[int, str]:
    from testbed.app.cli.main import main
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            main(["simulate", str(path), "-q"])
        except SystemExit as exc:
            return exc.code, err.getvalue()
    return 0, err.getvalue()


def check(path: Path, *, field: str | None, line: int | None, words: tuple[str, ...] = (),
          line_window: int = 0) -> None:
    """The loader and the CLI both report the defect as required.

    The line is checked on the loader's error (the CLI prints the same message).
    """
    with pytest.raises(InputError) as info:
        load(path)
    exc = info.value
    message = exc.format()
    assert "\n" not in message
    assert exc.source == str(path), message
    if field is not None:
        assert exc.field == field, message
    if line is not None:
        assert exc.line is not None and line <= exc.line <= line + line_window, message
    for w in words:
        assert w in message, message
    code, err = cli_in_process(path)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("testbed: error: "), err
    assert str(path) in err and "Traceback" not in err, err
    if field is not None:
        assert field in err, err


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    return path


def test_the_base_scenario_is_valid(tmp_path):
    text, _ = render(BASE)
    assert load(write(tmp_path, text)).nodes == 4


# ------------------------------------------------------------------- wrong unit
@SETTINGS
@given(target=st.sampled_from(DURATIONS), number=st.integers(1, 999),
       unit=st.sampled_from(["parsecs", "kg", "GiB", "furlongs", "MB/s", "weeksz", "hz"]))
def test_wrong_unit(tmp_path, target, number, unit):
    text, where = render(BASE, replace=(*target, f"{number} {unit}"))
    check(write(tmp_path, text), field=field_of(*target), line=where[target])


# ------------------------------------------------------------------- out of range
@SETTINGS
@given(data=st.data())
def test_out_of_range(tmp_path, data):
    kind = data.draw(st.sampled_from(["duration", "integer", "probability"]))
    sections = BASE
    if kind == "duration":
        target = data.draw(st.sampled_from(POSITIVE_DURATIONS))
        value = data.draw(st.sampled_from(["-5min", "0s", "-1h", "0", "-3"]))
    elif kind == "integer":
        target = data.draw(st.sampled_from(sorted(INTEGERS)))
        value = str(data.draw(st.integers(-10**6, INTEGERS[target] - 1)))
    else:
        sections = BASE + [("failures_bursts", [])]
        target = ("failures", "bursts")
        p = data.draw(st.sampled_from([1.5, -0.1, 0, 2]))
        value = f"{{probability: {p}, window: 1h}}"
    text, where = render(sections, replace=(*target, value)) if kind != "probability" else \
        render(BASE, extra=("failures", "bursts", value))
    expect = field_of(*target) + (".probability" if kind == "probability" else "")
    check(write(tmp_path, text), field=expect, line=where[target])


# ------------------------------------------------------------------- wrong type
@SETTINGS
@given(data=st.data())
def test_wrong_type(tmp_path, data):
    if data.draw(st.booleans()):
        target = data.draw(st.sampled_from(sorted(INTEGERS)))
        value = data.draw(st.sampled_from(["many", "[1, 2]", "{a: 1}", "3.5", "2x"]))
    else:
        target = data.draw(st.sampled_from(DURATIONS))
        value = data.draw(st.sampled_from(["[1, 2]", "{a: 1}", "true", "soon"]))
    text, where = render(BASE, replace=(*target, value))
    check(write(tmp_path, text), field=field_of(*target), line=where[target])


# ------------------------------------------------------------------- unknown key
def _fields(section: str) -> set[str]:
    from testbed.scenario import schema as s
    model = {"": s.Scenario, "workload": s.Workload, "cluster": s.Cluster,
             "failures": s.Failures, "checkpoint": s.Checkpoint,
             "simulation": s.Simulation}[section]
    return set(model.model_fields)


@st.composite
def typo(draw):
    section = draw(st.sampled_from([s for s, _ in BASE]))
    key = draw(st.sampled_from(sorted(k for k in _fields(section)
                                      if k not in ("source", "lines") and len(k) >= 5)))
    i = draw(st.integers(0, len(key) - 1))
    op = draw(st.sampled_from(["drop", "double", "swap", "letter"]))
    if op == "drop":
        bad = key[:i] + key[i + 1:]
    elif op == "double":
        bad = key[:i] + key[i] + key[i:]
    elif op == "swap" and i < len(key) - 1:
        bad = key[:i] + key[i + 1] + key[i] + key[i + 2:]
    else:
        bad = key[:i] + draw(st.sampled_from("qxzjk")) + key[i + 1:]
    if bad in _fields(section) or not bad or bad[0] == "_":
        bad = key + "zz"
    return section, bad


@SETTINGS
@given(bad=typo())
def test_unknown_key_with_did_you_mean(tmp_path, bad):
    section, key = bad
    text, where = render(BASE, extra=(section, key, "1"))
    check(write(tmp_path, text), field=field_of(section, key), line=where[(section, key)],
          words=("unknown key", "did you mean"))


# ------------------------------------------------------------------- YAML syntax
BREAKERS = ["key: [unclosed, list", "key: 'unterminated", "\tindented: with a tab",
            "key: value: another", "- a list item inside a mapping", "  : no key",
            "key: {a: 1", "@reserved: indicator"]


@SETTINGS
@given(data=st.data())
def test_yaml_syntax_error(tmp_path, data):
    text, _ = render(BASE)
    lines = text.splitlines()
    i = data.draw(st.integers(1, len(lines) - 1))
    breaker = data.draw(st.sampled_from(BREAKERS))
    indent = "  " if lines[i].startswith("  ") and not breaker.startswith(("\t", " ")) else ""
    lines.insert(i, indent + breaker)
    path = write(tmp_path, "\n".join(lines) + "\n")
    # the parser names the line of the defect or the next lines it reads
    check(path, field=None, line=i + 1, words=("invalid YAML",), line_window=len(lines))


# ------------------------------------------------------------------- missing files
@SETTINGS
@given(kind=st.sampled_from(["causes", "trace", "system"]),
       name=st.from_regex(r"[a-z][a-z0-9_]{2,12}", fullmatch=True))
def test_missing_referenced_file(tmp_path, kind, name):
    if kind == "causes":
        text, where = render(BASE, extra=("failures", "causes", f"missing_{name}"))
        target = ("failures", "causes")
    elif kind == "trace":
        sections = [(s, [(k, v) for k, v in items if (s, k) != ("failures", "node_mtbf")])
                    for s, items in BASE]
        text, where = render(sections, extra=("failures", "trace", f"missing-{name}.csv"))
        target = ("failures", "trace")
    else:
        text, where = render(BASE, extra=("", "system", f"missing-{name}"))
        target = ("", "system")
    check(write(tmp_path, text), field=field_of(*target), line=where[target],
          words=(f"missing{'_' if kind == 'causes' else '-'}{name}",))


# ------------------------------------------------------------------- real processes
EXAMPLES = {
    "syntax": ("name: x\nworkload: {compute_time: 24h\n", None),
    "unknown": ("name: x\nworkload:\n  compute_tme: 24h\n", "workload.compute_tme"),
    "type": ("name: x\nworkload: {compute_time: 24h}\nsimulation: {replications: many}\n",
             "simulation.replications"),
    "unit": ("name: x\nworkload: {compute_time: 24 parsecs}\n", "workload.compute_time"),
    "range": ("name: x\nworkload: {compute_time: -1h}\n", "workload.compute_time"),
    "file": ("name: x\nworkload: {compute_time: 1h}\nfailures: {trace: nope.csv}\n"
             "checkpoint: {cost: 1min, restart: 1min}\n",
             "failures.trace"),
}


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_cli_subprocess_exit_2_one_line(tmp_path, kind):
    text, field = EXAMPLES[kind]
    path = write(tmp_path, text)
    proc = subprocess.run([sys.executable, "-m", "testbed", "simulate", str(path)],
                          capture_output=True, text=True, cwd=REPO, env=env(), timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(path) in proc.stderr
    if field:
        assert field in proc.stderr
