"""Checkpoint cost model and the oracle integration (step time and state size)."""

from __future__ import annotations

import pytest

from testbed.app.resolve import resolve
from testbed.oracle import predict
from testbed.resilience.ckpt_cost import node_local_transfer_s, pfs_transfer_s
from testbed.scenario.schema import load_scenario, scenario_from_dict


def test_pfs_contention_bounds_aggregate_bandwidth():
    state = 800e9
    # few writers: limited by their links (4 × 10 GB/s = 40 GB/s < 100 GB/s PFS)
    assert pfs_transfer_s(state, 4, 100e9, 10e9) == pytest.approx(20.0)
    # many writers: they contend for the PFS, each gets 100 GB/s / 64
    assert pfs_transfer_s(state, 64, 100e9, 10e9) == pytest.approx(8.0)
    assert pfs_transfer_s(state, 1024, 100e9, 10e9) == pytest.approx(8.0)
    # metadata cost per writer, serialised
    assert pfs_transfer_s(state, 64, 100e9, 10e9, metadata_s=0.01) == pytest.approx(8.64)
    assert node_local_transfer_s(state, 100, 2e9) == pytest.approx(4.0)


def test_checkpoint_cost_and_step_time_come_from_the_oracle():
    sc = load_scenario("scenarios/quickstart.yaml")
    spec = resolve(sc)
    par = sc.parallelism
    est = predict(system=sc.system, model=sc.model.name, strategy=par.strategy, gpus=par.gpus,
                  global_batch=par.global_batch, input_shape=(3, 224, 224),
                  precision=sc.model.precision, optimizer=sc.model.optimizer)
    assert spec.step_s == est.time_per_iteration_s
    assert spec.state_bytes == est.state_bytes > 0
    # the blocking cost and the load are the storage physics the oracle reports, term by term
    assert spec.ckpt_cost_s == pytest.approx(est.checkpoint["write_s"])
    assert spec.plan.load_of(1) == pytest.approx(est.checkpoint["read_s"])
    assert spec.checkpoint_terms == est.checkpoint
    terms = ("device_to_host_s", "serialize_s", "transfer_s", "metadata_s", "fsync_s")
    assert spec.ckpt_cost_s == pytest.approx(sum(est.checkpoint[k] for k in terms))
    # ResNet-50's ~195 MiB state: a plausible fraction of a second, not milliseconds
    assert 0.1 < spec.ckpt_cost_s < 5.0
    assert spec.plan.work_s == pytest.approx(sc.workload.steps * est.time_per_iteration_s)
    assert spec.plan.step_s is not None and spec.plan.interval_steps >= 1


def test_a_state_without_a_model_uses_the_profile_storage_physics():
    doc = {"system": "abci-v100", "workload": {"compute_time": "10h"},
           "cluster": {"nodes": 8}, "failures": {"mtbf": "5h"},
           "checkpoint": {"state": "10GB", "policy": "young", "writers": "dp-shard"}}
    spec = resolve(scenario_from_dict(doc))
    single = resolve(scenario_from_dict({**doc, "checkpoint": {**doc["checkpoint"],
                                                                 "writers": "single"}}))
    assert spec.checkpoint_terms["writers"] == 8 and single.checkpoint_terms["writers"] == 1
    # sharding the write over the eight replicas cuts the per-writer serialisation eightfold
    assert spec.checkpoint_terms["serialize_s"] == pytest.approx(
        single.checkpoint_terms["serialize_s"] / 8)
    assert spec.ckpt_cost_s < single.ckpt_cost_s


def test_state_size_without_oracle_uses_storage_section():
    doc = {"workload": {"compute_time": "10h"}, "cluster": {"nodes": 8},
           "failures": {"mtbf": "5h"},
           "storage": {"pfs_write_bandwidth": "10GB/s", "pfs_read_bandwidth": "20GB/s",
                       "node_write_bandwidth": "2GB/s", "node_read_bandwidth": "2GB/s"},
           "checkpoint": {"state": "100GB", "policy": "young"}}
    spec = resolve(scenario_from_dict(doc))
    assert spec.ckpt_cost_s == pytest.approx(100e9 / 10e9)
    assert spec.plan.load_of(1) == pytest.approx(100e9 / 16e9)
