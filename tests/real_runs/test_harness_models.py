"""The harness models are zoo models: each framework builds the layer IR's architecture,
with exactly the IR's parameter count (real PyTorch, TensorFlow/Keras and Chainer)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from real_runs.env import child_env
from real_runs.harness import RunConfig
from testbed.model.registry import get_model
from testbed.model.zoo.harness import harness_model, model_key

#: (harness model, size options): every model and each option.
CASES = [("mlp", {}), ("cnn", {}), ("resnet", {}), ("resnet18", {"width": 8}),
         ("mlp", {"width": 20, "depth": 3}), ("cnn", {"width": 16, "depth": 3,
                                                      "input_shape": [3, 16, 16]}),
         ("resnet", {"width": 12, "depth": 1})]

_COUNT = """
import json, sys
from real_runs.harness import RunConfig, make_backend
out = []
for model, opts in json.loads(sys.argv[2]):
    if "input_shape" in opts:
        opts["input_shape"] = tuple(opts["input_shape"])
    cfg = RunConfig(framework=sys.argv[1], model=model, **opts).validated()
    backend = make_backend(cfg.framework)
    backend.build(cfg)
    out.append(backend.parameter_count())
print(json.dumps(out))
"""


def test_resnet18_cifar_is_the_published_size():
    # ResNet-18 for CIFAR-10 (3x3 stem, no max pool, 10 classes): 11,173,962 parameters
    assert get_model("resnet18").parameters == 11_173_962
    assert get_model("resnet18cifar").input_shape == (3, 32, 32)


def test_variants_have_their_own_names():
    assert model_key("cnn") == "cnn" and model_key("resnet") == "resnetmini"
    assert model_key("cnn", width=64, depth=3) == "cnn-w64-d3"
    assert harness_model("mlp", input_shape=(3, 32, 32)).name == "mlp-i3x32x32"
    cfg = RunConfig(framework="torch", model="cnn", width=64).validated()
    assert cfg.ir().name == "cnn-w64" and cfg.depth == 2 and cfg.input_shape == (1, 8, 8)


@pytest.mark.frameworks
@pytest.mark.timeout(300)
@pytest.mark.parametrize("framework", ["torch", "tensorflow", "chainer"])
def test_every_framework_builds_the_ir(framework):
    proc = subprocess.run([sys.executable, "-c", _COUNT, framework, json.dumps(CASES)],
                          capture_output=True, text=True, env=child_env(), timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = []
    for model, opts in CASES:
        shape = tuple(opts["input_shape"]) if "input_shape" in opts else None
        expected.append(harness_model(model, opts.get("width"), opts.get("depth"),
                                      shape).parameters)
    assert counts == expected


def test_model_info_agrees(cli):
    # `testbed model info cnn` is the harness CNN: 6,090 parameters in every framework
    proc = subprocess.run([sys.executable, "-m", "testbed", "model", "info", "cnn", "--json"],
                          capture_output=True, text=True, env=child_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["parameters"] == 6090 == harness_model("cnn").parameters
