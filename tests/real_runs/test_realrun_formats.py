"""Checkpoint formats: bytes on disk agree with the oracle's predicted state size.

For each format the test states the overhead it adds: uncompressed formats store the
payload one to one (their size grows exactly like ``state_bytes`` when the model
grows) plus a fixed overhead (headers, metadata, the traced graph) bounded below;
compressed formats store somewhat less than the payload of random-looking floats.
"""

from __future__ import annotations

import pytest

from real_runs.formats import FORMATS, run_bench_subprocess
from testbed.oracle.state import state_bytes

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]

KiB = 1024
#: Fixed bytes each uncompressed format adds on top of the payload (upper bounds).
FIXED_OVERHEAD_MAX = {
    "torch.save": 8 * KiB,                    # zip entries + pickled structure
    "torch.distributed.checkpoint": 64 * KiB,  # .metadata with per-tensor storage plans
    "tf.train.Checkpoint": 8 * KiB,           # tensor bundle index + object graph proto
    "keras.weights.h5": 48 * KiB,             # one HDF5 object header per variable
    "keras.keras": 48 * KiB,                  # zip of config.json, metadata and weights.h5
    "SavedModel": 96 * KiB,                   # the traced serving graph
    "save_npz": 8 * KiB,                      # zip + .npy headers
    # the harness's own checkpoint: back-end files, state.json (losses, RNG and
    # data-iterator states: about 20 KiB) and MANIFEST.json
    "harness": 64 * KiB,
}
#: Compressed formats: bytes relative to the payload (random floats compress little).
COMPRESSED_RATIO = {"save_npz.compressed": (0.80, 1.0), "save_hdf5": (0.80, 1.0)}

WIDTHS = [16, 128]


@pytest.mark.parametrize("framework", list(FORMATS))
def test_sizes_agree_with_predicted_state(framework):
    small, large = run_bench_subprocess(framework, "mlp", WIDTHS, repeats=1)
    for report in (small, large):
        assert [row["format"] for row in report["formats"]] == [*FORMATS[framework], "harness"]
        assert all(row["files"] >= 1 for row in report["formats"])
        assert report["predicted_state_bytes"] == state_bytes(report["parameters"], "momentum")
        assert report["env"]["framework"] == framework and report["env"]["framework_version"]
    assert large["parameters"] > 10 * small["parameters"]
    for row_s, row_l in zip(small["formats"], large["formats"], strict=True):
        name = row_s["format"]
        assert row_s["includes_optimizer"]  # every measured format carries the momentum slots
        assert row_s["predicted_bytes"] == state_bytes(small["parameters"], "momentum")
        assert row_s["save_s"] > 0 and row_s["load_s"] > 0
        growth = ((row_l["ckpt_bytes"] - row_s["ckpt_bytes"])
                  / (row_l["predicted_bytes"] - row_s["predicted_bytes"]))
        if row_s["compressed"]:
            low, high = COMPRESSED_RATIO[name]
            assert low <= growth <= high, (name, growth)
            for row in (row_s, row_l):
                assert row["ckpt_bytes"] <= row["predicted_bytes"] + 64 * KiB
        else:
            assert abs(growth - 1.0) < 0.01, (name, growth)
            for row in (row_s, row_l):
                assert 0 < row["overhead_bytes"] <= FIXED_OVERHEAD_MAX[name], (name, row)
