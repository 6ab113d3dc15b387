"""Hypothesis properties: time and memory are monotone where they must be."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from testbed.model.registry import get_model
from testbed.oracle import Request, estimate
from testbed.systems.profile import load_system

SYSTEMS = ["abci-v100", "a100-cluster", "h100-cluster"]
MODELS = {name: get_model(name) for name in ("resnet50", "vgg16", "alexnet")}
STRATS = ["data", "spatial", "filter", "channel", "pipeline", "df", "ds"]


def run(system, model, strategy, gpus, batch, **kw):
    return estimate(Request(model=MODELS[model], system=load_system(system), strategy=strategy,
                            gpus=gpus, global_batch=batch, group_size=4 if strategy in ("df", "ds") else None,
                            **kw))


@settings(max_examples=150, deadline=None)
@given(system=st.sampled_from(SYSTEMS), model=st.sampled_from(sorted(MODELS)),
       strategy=st.sampled_from(STRATS), log_p=st.integers(2, 9), batch=st.integers(1, 4096),
       extra=st.integers(1, 4096))
def test_bigger_batch_never_faster_or_smaller(system, model, strategy, log_p, batch, extra):
    p = 2 ** log_p
    a = run(system, model, strategy, p, batch)
    b = run(system, model, strategy, p, batch + extra)
    assume(a.time_per_iteration_s is not None and b.time_per_iteration_s is not None)
    assert b.time_per_iteration_s >= a.time_per_iteration_s * (1 - 1e-12)
    assert b.memory_per_gpu_bytes >= a.memory_per_gpu_bytes


@settings(max_examples=150, deadline=None)
@given(system=st.sampled_from(SYSTEMS), model=st.sampled_from(sorted(MODELS)),
       log_p=st.integers(0, 11), per_gpu=st.integers(1, 256))
def test_data_parallel_weak_scaling(system, model, log_p, per_gpu):
    """Same samples per GPU on twice the GPUs: same compute and memory, no less
    communication (the all-reduce never gets cheaper with more ranks)."""
    p = 2 ** log_p
    a = run(system, model, "data", p, per_gpu * p)
    b = run(system, model, "data", 2 * p, per_gpu * 2 * p)
    assume(a.time_per_iteration_s is not None and b.time_per_iteration_s is not None)
    assert b.compute_s == a.compute_s
    assert b.memory_per_gpu_bytes == a.memory_per_gpu_bytes
    assert b.communication_total_s >= a.communication_total_s * (1 - 1e-12)


@settings(max_examples=150, deadline=None)
@given(system=st.sampled_from(SYSTEMS), model=st.sampled_from(sorted(MODELS)),
       strategy=st.sampled_from(["data", "spatial", "filter", "channel"]),
       log_p=st.integers(0, 5), batch=st.integers(64, 4096))
def test_more_gpus_less_compute_and_memory(system, model, strategy, log_p, batch):
    """Strong scaling: the local work and the memory per GPU never grow with p."""
    p = 2 ** log_p
    a = run(system, model, strategy, p, batch)
    b = run(system, model, strategy, 2 * p, batch)
    assume(a.time_per_iteration_s is not None and b.time_per_iteration_s is not None)
    assert b.compute_s <= a.compute_s * (1 + 1e-12)
    assert b.memory_per_gpu_bytes <= a.memory_per_gpu_bytes


@settings(max_examples=100, deadline=None)
@given(model=st.sampled_from(sorted(MODELS)), log_p=st.integers(1, 10))
def test_time_is_sum_of_nonnegative_phases(model, log_p):
    e = run("abci-v100", model, "data", 2 ** log_p, 2 ** log_p * 32)
    assume(e.time_per_iteration_s is not None)
    assert all(v >= 0 for v in e.phases_s.values())
    assert abs(sum(e.phases_s.values()) - e.time_per_iteration_s) < 1e-12 * e.time_per_iteration_s + 1e-15
