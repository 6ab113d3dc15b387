"""A fuzzer: hypothesis mutates valid scenarios, profiles and traces at the byte level
and at the YAML level; whatever comes out, a command either works (exit 0) or refuses
with one clear line (exit 2) — never a traceback, never a hang, the input unchanged."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.cases import KINDS, READERS, REFERRING_SCENARIO, SUFFIX
from tests.hostile.harness import run_in_process

FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
#: Replacement values for one scalar of a YAML document: other types, other units,
#: nonsense and extremes.
JUNK = ["0", "-1", "1e308", "-1e308", ".nan", ".inf", "-.inf", "null", "~", "true", "''",
        "[]", "{}", "[1, 2]", "{a: 1}", "1e-300", "5M", "5mb", "2GiB", "3d", "9" * 40,
        "'\\u0000'", "&x 1", "*nosuch", "!!binary aGVsbG8=", "'x' * 3", "1h30", "PT1H",
        "\"\\xff\"", "0x10", "1_000", "+.5", "..", "-", "?", "%",
        # issue 20: past Python's 4,300-digit int() limit, and dates no calendar has
        "9" * 5000, "0x" + "f" * 400, "9999-99-99", "2020-02-30", "1:" * 300 + "1"]


@st.composite
def byte_mutation(draw, data: bytes) -> bytes:
    ops = draw(st.lists(st.sampled_from(["flip", "insert", "delete", "truncate", "dup"]),
                        min_size=1, max_size=4))
    buf = bytearray(data)
    for op in ops:
        if not buf:
            break
        i = draw(st.integers(0, len(buf) - 1))
        if op == "flip":
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del buf[i:i + draw(st.integers(1, 16))]
        elif op == "truncate":
            del buf[i:]
        else:
            j = draw(st.integers(i, min(len(buf), i + 40)))
            buf[j:j] = buf[i:j]
    return bytes(buf)


_SCALAR = re.compile(r"(:\s*)([^\s,{}\[\]][^,{}\[\]\n]*)")


@st.composite
def yaml_mutation(draw, text: str) -> str:
    spots = list(_SCALAR.finditer(text))
    m = spots[draw(st.integers(0, len(spots) - 1))]
    junk = draw(st.sampled_from(JUNK) | st.text(min_size=0, max_size=12))
    junk = junk.replace("\n", " ")
    return text[:m.start(2)] + junk + text[m.end(2):]


def _check_any(tmp_path, kind: str, content: bytes) -> None:
    path = tmp_path / f"input{SUFFIX[kind]}"
    path.write_bytes(content)
    args_list = []
    for template in READERS[kind][:2]:
        args = []
        for a in template:
            if a == "{ref}":
                ref = tmp_path / "refers.yaml"
                ref.write_text(REFERRING_SCENARIO[kind].format(f=path))
                a = str(ref)
            args.append(a.replace("{f}", str(path)).replace("{out}", str(tmp_path / "out")))
        args_list.append(args)
    for args in args_list:
        if args[0] in ("run", "sweep", "report"):
            continue   # covered by the parametrised suite; keep the fuzzer fast
        out = run_in_process(args, cwd=tmp_path)
        assert out.code in (0, 2), (args, out.code, out.stderr[-1500:])
        assert "Traceback" not in out.stderr, out.stderr[-1500:]
        if out.code == 2:
            lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
            assert 1 <= len(lines) <= 3, out.stderr
        assert path.read_bytes() == content
        assert out.seconds < 30


@FUZZ
@given(data=st.data())
def test_fuzz_scenarios(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("fz")
    text = KINDS["scenario"]
    if data.draw(st.booleans()):
        content = data.draw(byte_mutation(text.encode()))
    else:
        content = data.draw(yaml_mutation(text)).encode()
    _check_any(tmp, "scenario", content)


@FUZZ
@given(data=st.data())
def test_fuzz_profiles(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("fz")
    text = KINDS["system"]
    if data.draw(st.booleans()):
        content = data.draw(byte_mutation(text.encode()))
    else:
        content = data.draw(yaml_mutation(text)).encode()
    _check_any(tmp, "system", content)


@FUZZ
@given(data=st.data())
def test_fuzz_traces_and_tables(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("fz")
    kind = data.draw(st.sampled_from(["trace", "causes", "fta", "calibration"]))
    content = data.draw(byte_mutation(KINDS[kind].encode()))
    _check_any(tmp, kind, content)
