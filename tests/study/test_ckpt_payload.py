"""The writers' payload: ResNet-50's training state from its IR, split among writers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from real_runs.ckpt_study.payload import payload, shard, state_shapes, tensor_bytes
from real_runs.ckpt_study.subjects import model_ir
from testbed.oracle.state import state_bytes


def test_resnet50_state_is_weights_momentum_and_batch_norm_statistics():
    ir = model_ir("resnet50")
    shapes = state_shapes(ir)
    bn_channels = sum(layer.x[0] for layer in ir.layers if layer.kind == "bn")
    total = sum(tensor_bytes(s) for _, s in shapes)
    assert ir.parameters == 25_557_032
    # weights + one momentum slot each (the oracle's state) + running mean and variance
    assert total == state_bytes(ir.parameters, "momentum", "fp32") + 8 * bn_channels
    assert len({name for name, _ in shapes}) == len(shapes)


@given(writers=st.integers(1, 12))
def test_shards_partition_the_state_and_balance_it(writers):
    shapes = state_shapes(model_ir("resnet"))
    parts = [shard(shapes, i, writers) for i in range(writers)]
    names = [name for part in parts for name, _ in part]
    assert sorted(names) == sorted(name for name, _ in shapes)
    loads = [sum(tensor_bytes(s) for _, s in part) for part in parts]
    biggest = max(tensor_bytes(s) for _, s in shapes)
    assert max(loads) - min(loads) <= biggest     # greedy largest-first: within one tensor


def test_payload_is_seeded_per_writer():
    shapes = state_shapes(model_ir("mlp"))[:3]
    a, b = payload(shapes, 0, 0), payload(shapes, 0, 0)
    assert all((a[k] == b[k]).all() and a[k].dtype.name == "float32" for k in a)
    c = payload(shapes, 0, 1)
    assert any((a[k] != c[k]).any() for k in a)
