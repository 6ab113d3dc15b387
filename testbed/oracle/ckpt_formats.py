"""Checkpoint file formats at scale: bytes on storage and time to write and read them.

Inputs of the checkpoint-format study (``scenarios/ckpt-format-*.yaml``). A format's
checkpoint holds the payload of :func:`testbed.oracle.state.state_bytes` (parameters
plus the optimizer's slots) and adds, per saved tensor, its container's bookkeeping:

* **PyTorch** ``torch.save`` / ``torch.distributed.checkpoint`` — a zip archive (or,
  for DCP, one file per writer plus a ``.metadata`` file) whose tensor storages are
  zip entries: a 30-byte local header and a 46-byte central-directory record, each
  with the entry name (``archive/data/N``, ~16 bytes), payloads aligned to 64 bytes
  (32 bytes of padding on average), and the pickled tensor description (~100 bytes):
  about 240 bytes per tensor.
* **TensorFlow** ``tf.train.Checkpoint`` — a TensorBundle: the data shard without
  padding, and an ``.index`` table with one entry per tensor (its object-graph key,
  ~60 bytes, and a BundleEntryProto with dtype, shape, shard, offset, size and CRC32C,
  ~30 bytes) plus the serialized object graph (~150 bytes per variable): ~240 bytes.
* **Chainer** ``save_npz`` (uncompressed) — a zip of ``.npy`` arrays: the 30 + 46
  byte zip records with the array's path (~40 bytes, twice), and the ``.npy`` v1.0
  header padded to a multiple of 64 bytes (128 bytes for ordinary shapes): ~284 bytes.

These per-tensor figures follow from the formats' documented layouts; the real-run
harness (``python -m real_runs.formats``) measures actual files. What matters at
scale is less the bytes than *who writes*: a single writer (rank 0 or the chief)
is limited to one node's link, while a sharded checkpoint spreads over every node
and is limited by the parallel file system. Write and read times use the same cost
model as the simulator (:func:`testbed.resilience.ckpt_cost.pfs_transfer_s`) with
the number of writers in place of the node count.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.oracle.state import optimizer_slots, state_bytes


@dataclass(frozen=True)
class CkptFormat:
    """A checkpoint format and the way a data-parallel job writes it."""

    name: str
    framework: str
    per_tensor_bytes: int
    fixed_bytes: int
    sharded: bool          # every node writes its share (True) or one process writes all


FORMATS = {
    "pytorch-dcp": CkptFormat("torch.distributed.checkpoint", "pytorch", 240, 4096, True),
    "pytorch-save": CkptFormat("torch.save on rank 0", "pytorch", 240, 1024, False),
    "tensorflow": CkptFormat("tf.train.Checkpoint by the chief", "tensorflow", 240, 2048, False),
    "chainer": CkptFormat("save_npz snapshot on rank 0", "chainer", 284, 22, False),
}


def checkpoint_file_bytes(fmt: str, parameters: int, tensors: int, optimizer: str = "adam",
                 precision: str = "fp32") -> int:
    """Bytes of one checkpoint: payload plus per-tensor and fixed overheads."""
    f = FORMATS[fmt]
    saved_tensors = tensors * (1 + optimizer_slots(optimizer))
    return (state_bytes(parameters, optimizer, precision) + saved_tensors * f.per_tensor_bytes
            + f.fixed_bytes)


def write_read_s(fmt: str, nbytes: int, nodes: int, pfs_write_Bps: float,
                 pfs_read_Bps: float, node_Bps: float) -> tuple[float, float]:
    """Seconds to write and to read a checkpoint of ``nbytes`` (sharded or single writer)."""
    from testbed.resilience.ckpt_cost import pfs_transfer_s

    writers = nodes if FORMATS[fmt].sharded else 1
    return (pfs_transfer_s(nbytes, writers, pfs_write_Bps, node_Bps),
            pfs_transfer_s(nbytes, writers, pfs_read_Bps, node_Bps))
