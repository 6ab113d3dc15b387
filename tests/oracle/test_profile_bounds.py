"""Every number of a profile is bounded to what is physical (issue 18, with issue 20's
input boundary): a typo is refused with one line naming the file and the field, exit 2,
before any prediction; the software stack a request names must exist."""

from __future__ import annotations

import pytest
import yaml

from testbed.io.packaged import data_dir


def _profile(tmp_path, edit) -> str:
    data = yaml.safe_load((data_dir("systems") / "a100-cluster.yaml").read_text())
    edit(data)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _set(path: str, value):
    def edit(data):
        node = data
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[keys[-1]] = value
    return edit


@pytest.mark.parametrize("field,value,needle", [
    ("network.tiers.0.latency_us", 1e308, "latency_us"),
    ("network.tiers.1.bandwidth_GBps", 1e12, "bandwidth_GBps"),
    ("network.tiers.1.span_gpus", 10**9, "span_gpus"),
    ("network.nic_GBps", 1e9, "nic_GBps"),
    ("gpu.sm_count", 10**7, "sm_count"),
    ("gpu.gemm_efficiency.fp16", 1.5, "gemm_efficiency"),
    ("gpu.memory_bandwidth_GBps", 1e300, "memory_bandwidth_GBps"),
    ("node.cpu_cores", 10**9, "cpu_cores"),
    ("storage.fsync_ms", 1e100, "fsync_ms"),
    ("software.stacks.pytorch.launch_us", 1e300, "launch_us"),
    ("software.stacks.pytorch.decode_core_ms", -1, "decode_core_ms"),
    ("software.default", "nosuch", "default"),
])
def test_implausible_profile_values_are_refused(cli, tmp_path, field, value, needle):
    path = _profile(tmp_path, _set(field, value))
    r = cli("oracle", "collective", "--system", path, "--op", "allreduce", "--bytes", "1MiB",
            "--gpus", "8")
    assert r.returncode == 2, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "p.yaml" in lines[0] and needle in lines[0]


def test_a_source_must_say_what_it_rests_on(cli, tmp_path):
    def edit(data):
        data["sources"]["gpu.sm_count"] = {"kind": "fit", "ref": "solved from nothing"}
    r = cli("oracle", "predict", "--system", _profile(tmp_path, edit), "--model", "resnet50",
            "--strategy", "serial", "--gpus", "1", "--global-batch", "8")
    assert r.returncode == 2 and "data" in r.stderr and "p.yaml" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--software", "pytorh"], "pytorch"),
    (["--bucket-mb", "0"], "bucket"),
    (["--bucket-mb", "1e30"], "bucket"),
])
def test_bad_software_options(cli, args, needle):
    r = cli("oracle", "predict", "--system", "a100-cluster", "--model", "resnet50", "--strategy",
            "data", "--gpus", "8", "--global-batch", "256", *args)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
