"""``testbed model info|list|export`` through the real entry point (exit codes 0 and 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from testbed.app.cli.main import main
from testbed.model.netfile import load_net


def run(argv, capsys):
    """Run ``testbed ARGV`` in-process; returns (exit status, stdout, stderr)."""
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def test_info_json_keys(capsys):
    code, out, _ = run(["model", "info", "resnet50", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    for key in ("parameters", "forward_macs", "layers", "activation_elements_per_sample"):
        assert key in data
    assert data["parameters"] == 25_557_032
    assert data["layers_by_kind"]["add"] == 16
    assert data["input_shape"] == "3x224x224"


def test_info_table_is_readable(capsys):
    code, out, _ = run(["model", "info", "vgg", "--input-shape", "3x224x224"], capsys)
    assert code == 0
    assert "138,357,544" in out and "parameters" in out and "conv" in out


def test_info_input_shape_changes_macs(capsys):
    _, small, _ = run(["model", "info", "resnet50", "--input-shape", "3x112x112", "--json"],
                      capsys)
    _, big, _ = run(["model", "info", "resnet50", "--json"], capsys)
    assert json.loads(small)["forward_macs"] < json.loads(big)["forward_macs"]


def test_info_on_paradl_file(paradl_dir, capsys):
    code, out, _ = run(["model", "info", str(paradl_dir / "VGG_ImageNet_profall.net_sc"),
                        "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["weight_elements"] == 169_801_408
    assert data["profiled_s_per_sample"] == pytest.approx(0.0082456, rel=1e-3)


def test_list(capsys):
    code, out, _ = run(["model", "list"], capsys)
    assert code == 0
    for name in ("resnet50", "resnet152", "vgg16", "alexnet", "cosmoflow", "unet3d"):
        assert name in out
    code, out, _ = run(["model", "list", "--json"], capsys)
    assert [r["name"] for r in json.loads(out)][0] == "resnet50"


def test_export_writes_loadable_net(tmp_path, capsys):
    target = tmp_path / "cosmo.net"
    code, out, _ = run(["model", "export", "cosmoflow", "-o", str(target),
                        "--input-shape", "4x512x512x512", "--dataset", "CosmoFlow",
                        "--dataset-samples", "1584"], capsys)
    assert code == 0 and "wrote" in out
    net = load_net(target)
    assert net.dataset == "CosmoFlow" and net.dataset_samples == 1584
    assert net.model.weight_elements == 2_128_064
    assert [p.name for p in tmp_path.iterdir()] == ["cosmo.net"]  # no temp file left


@pytest.mark.parametrize(("argv", "fragment"), [
    (["model", "info", "resnet5"], "did you mean 'resnet50'"),
    (["model", "info", "resnet50", "--input-shape", "3xbig"], "cannot read shape"),
    (["model", "info", "alexnet", "--input-shape", "3x16x16"], "too small for alexnet"),
    (["model", "info", "unet3d", "--input-shape", "1x30x30x30"], "divisible by 8"),
    (["model", "export", "nonet", "-o", "x.net"], "unknown model"),
    (["model", "info"], "Missing argument"),
])
def test_bad_input_is_one_line_exit_2(argv, fragment, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2
    assert fragment in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err + out


def test_malformed_net_file_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.net_sc"
    path.write_text("Input|10x3x8x8\nCONV_1|3x8x8|3x4x3x3|4x6x6\nFC|4x6x6|4x10|\n")
    code, _, err = run(["model", "info", str(path)], capsys)
    assert code == 2 and f"{path}:3" in err and len(err.strip().splitlines()) == 1


def test_export_to_missing_directory_exit_2(tmp_path, capsys):
    code, _, err = run(["model", "export", "alexnet", "-o", str(tmp_path / "no" / "a.net")],
                       capsys)
    assert code == 2 and "a.net" in err and ("cannot write" in err or "does not exist" in err)


def test_subprocess_entry_point(tmp_path):
    env = dict(os.environ, SETUPTOOLS_USE_DISTUTILS="stdlib", TF_CPP_MIN_LOG_LEVEL="2")
    ok = subprocess.run([sys.executable, "-m", "testbed", "model", "info", "alexnet", "--json"],
                        capture_output=True, text=True, timeout=120, env=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["parameters"] == 61_100_840
    bad = subprocess.run([sys.executable, "-m", "testbed", "model", "info", "lenet"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
