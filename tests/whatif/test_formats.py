"""The checkpoint-format study's numbers follow from testbed.oracle.ckpt_formats.

The scenario files carry state sizes and write/read times; they must be exactly
what the format model computes for the model, formats and ABCI storage the files
describe, so the library cannot drift from the model (and vice versa).
"""

from __future__ import annotations

import pytest

from testbed.oracle.ckpt_formats import FORMATS, checkpoint_file_bytes, write_read_s
from testbed.oracle.state import state_bytes
from testbed.scenario.schema import load_scenario
from testbed.systems.profile import load_system
from tests.conftest import each
from tests.whatif.conftest import REPO

PARAMETERS, TENSORS, NODES = 1_557_611_200, 580, 256
FILES = {"pytorch": "pytorch-dcp", "tensorflow": "tensorflow", "chainer": "chainer"}


@pytest.mark.parametrize("name", sorted(FILES))
def test_format_scenarios_match_the_model(name):
    sc = load_scenario(REPO / "scenarios" / f"ckpt-format-{name}.yaml")
    fmt = FILES[name]
    nbytes = checkpoint_file_bytes(fmt, PARAMETERS, TENSORS, "adam", "fp32")
    storage = load_system("abci-v100").storage
    write_s, read_s = write_read_s(fmt, nbytes, NODES, storage.pfs_write_bandwidth_Bps,
                                   storage.pfs_read_bandwidth_Bps,
                                   storage.pfs_per_node_GBps * 1e9)
    assert sc.checkpoint.state == nbytes
    assert sc.cluster.nodes == NODES
    assert sc.checkpoint.cost == pytest.approx(write_s, abs=1e-6)
    assert sc.checkpoint.restart == pytest.approx(read_s, abs=1e-6)


def test_payload_dominates_and_writers_decide():
    payload = state_bytes(PARAMETERS, "adam", "fp32")
    sizes = {f: checkpoint_file_bytes(f, PARAMETERS, TENSORS) for f in FORMATS}
    for size in each(sizes.values()):
        assert 0 < size - payload < 1e-4 * payload       # container overhead is tiny
    sharded = write_read_s("pytorch-dcp", sizes["pytorch-dcp"], NODES, 28e9, 50e9, 12.5e9)
    single = write_read_s("chainer", sizes["chainer"], NODES, 28e9, 50e9, 12.5e9)
    # one writer: one node link (12.5 GB/s); sharded: the file system (28 GB/s write)
    assert single[0] == pytest.approx(sizes["chainer"] / 12.5e9)
    assert sharded[0] == pytest.approx(sizes["pytorch-dcp"] / 28e9)
