"""The per-layer compute model, the software stacks and the gradient buckets: closed
forms on small examples and invariants (issue 18)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.model.registry import get_model
from testbed.oracle import predict
from testbed.oracle.device import software_stack
from testbed.oracle.kernels import FULL_REUSE, gemm_efficiency, layer_work, step_times
from testbed.oracle.overlap import bucket_layers, bucketed
from testbed.systems.profile import load_system

MODELS = {n: get_model(n) for n in ("resnet50", "vgg16", "alexnet", "cnn")}


def test_one_tile_on_a_full_gpu_uses_one_sm():
    """A 128 x 128 GEMM is one tile: one of 108 SMs works (wave quantisation)."""
    one = np.array([128.0])
    eff = gemm_efficiency(one, one, one, np.array([1.0]), 108, tile=(128, 128))
    assert eff[0] == pytest.approx(1 / 108)
    # 108 tiles fill one wave exactly; 109 need a second, half-empty on average
    m = np.array([128.0 * 108])
    assert gemm_efficiency(m, one, one, np.array([1.0]), 108, tile=(128, 128))[0] == 1.0
    m = np.array([128.0 * 109])
    assert gemm_efficiency(m, one, one, np.array([1.0]), 108, tile=(128, 128))[0] == \
        pytest.approx(109 / 216)
    # smaller tiles reuse each element less: a 64 x 64 tile reaches 32 / 64 of the rate
    m = np.array([64.0 * 108])
    small = gemm_efficiency(m, np.array([64.0]), one, np.array([1.0]), 108, tile=(64, 64))
    assert small[0] == pytest.approx(32 / FULL_REUSE)


def test_convolutions_become_three_gemms():
    work = layer_work(MODELS["resnet50"])
    convs = sum(1 for k in work.kinds if k in ("conv", "fc"))
    # forward, data gradient (not for the first layer) and weight gradient
    assert len(work.g_layer) == 3 * convs - 1
    b = 7.0
    flops = 2 * (work.g_m0 + work.g_m1 * b) * work.g_n * (work.g_k0 + work.g_k1 * b) * work.g_groups
    fwd = flops[~work.g_backward].sum()
    assert fwd == pytest.approx(2 * MODELS["resnet50"].forward_macs * b, rel=1e-9)


def test_fusion_and_graphs_change_what_they_should():
    system = load_system("a100-cluster")
    model = MODELS["resnet50"]
    eager = step_times(model, 64, system.gpu, software_stack(system, "pytorch"), "bf16", 2)
    graphs = step_times(model, 64, system.gpu, software_stack(system, "cuda-graphs"), "bf16", 2)
    fused = step_times(model, 64, system.gpu, software_stack(system, "mxnet"), "bf16", 2)
    assert graphs.host_s < 1e-4 < eager.host_s             # one graph launch per step
    assert fused.kernels < 0.6 * eager.kernels             # ReLU, add, bias folded in
    assert fused.gpu_s < graphs.gpu_s                      # fewer bytes streamed
    # the GEMMs are the same kernels on every stack
    assert fused.forward_gpu_s[0] == pytest.approx(graphs.forward_gpu_s[0], rel=0.05)


def test_buckets_closed_form():
    """Three layers of 10 MB, backward done at 1, 2, 3 s (last layer first), 10 MB
    buckets taking 1.5 s each: all-reduces end at 2.5, 4.0, 5.5 s; 2.5 s exposed after
    a 3 s backward."""
    grad = np.array([10e6, 10e6, 10e6])
    done = np.array([3.0, 2.0, 1.0])
    b = bucketed(grad, done, 3.0, lambda nbytes: 1.5 * nbytes / 10e6, 10e6, 10e6)
    assert b.times_s == (1.5, 1.5, 1.5) and b.ready_s == (1.0, 2.0, 3.0)
    assert b.exposed_s == pytest.approx(2.5)
    assert bucket_layers(grad, 25e6, 1e6) == [[2], [1, 0]]


def test_bucket_size_is_a_request_option():
    small = predict("a100-cluster", "resnet50", "data", 16, 16 * 64, precision="bf16",
                    bucket_MB=5)
    large = predict("a100-cluster", "resnet50", "data", 16, 16 * 64, precision="bf16",
                    bucket_MB=100)
    assert small.collectives[0]["count"] > large.collectives[0]["count"] >= 2
    assert small.communication_total_s > large.communication_total_s   # more latencies


def test_no_overlap_exposes_the_whole_all_reduce():
    kw = dict(strategy="data", gpus=64, global_batch=64 * 32, precision="bf16")
    on = predict("a100-cluster", "resnet50", overlap=True, **kw)
    off = predict("a100-cluster", "resnet50", overlap=False, **kw)
    assert off.communication_s == pytest.approx(off.communication_total_s)
    assert on.communication_s < off.communication_s


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(sorted(MODELS)),
       system=st.sampled_from(["dgx1-v100", "a100-cluster", "h100-cluster"]),
       stack=st.sampled_from(["pytorch", "cuda-graphs", "mxnet"]),
       precision=st.sampled_from(["fp32", "bf16"]),
       batch=st.integers(1, 512), extra=st.integers(1, 512))
def test_a_larger_batch_never_steps_faster(model, system, stack, precision, batch, extra):
    s = load_system(system)
    nbytes = 4 if precision == "fp32" else 2
    prec = "fp16" if precision == "bf16" and system == "dgx1-v100" else precision
    a = step_times(MODELS[model], batch, s.gpu, software_stack(s, stack), prec, nbytes)
    b = step_times(MODELS[model], batch + extra, s.gpu, software_stack(s, stack), prec, nbytes)
    assert b.total_s >= a.total_s * (1 - 1e-12)
    assert (b.backward_gpu_s >= a.backward_gpu_s * (1 - 1e-12)).all()


def test_software_names_and_framework_aliases(cli):
    import json
    r = cli("oracle", "predict", "--system", "h100-cluster", "--model", "resnet50", "--strategy",
            "data", "--gpus", "8", "--global-batch", "2048", "--software", "graph", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["compute_model"]["software"] == "mxnet"
    r = cli("oracle", "predict", "--system", "h100-cluster", "--model", "resnet50", "--strategy",
            "data", "--gpus", "8", "--global-batch", "2048")
    assert "pytorch" in r.stdout


def test_layers_command(cli):
    import json
    r = cli("oracle", "layers", "--system", "a100-cluster", "--model", "resnet50", "--batch",
            "64", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["layers"]) == len(MODELS["resnet50"].layers)
    gpu = sum(x["forward_s"] + x["backward_s"] for x in out["layers"]) + out["optimizer_s"]
    assert gpu == pytest.approx(out["gpu_s"])
    assert out["step_s"] == pytest.approx(max(out["gpu_s"], out["host_s"]))
    r = cli("oracle", "layers", "--system", "laptop-cpu", "--model", "cnn", "--batch", "4")
    assert r.returncode == 2 and "per-layer" in r.stderr
