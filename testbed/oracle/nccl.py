"""NCCL's protocols and its tuner's cost model, as data (issue 18).

NCCL moves data with three protocols (Jeaugey, "NCCL 2.x" talks; NCCL
``src/graph/tuning.cc``, v2.19, whose constants these are):

* **Simple** — large chunks (a 4 MiB buffer in 8 steps) with a memory fence per
  chunk: full bandwidth, the highest latency per step;
* **LL** (low latency) — 8-byte stores carrying 4 bytes of data and a 4-byte flag, no
  fence: a quarter of the bandwidth across nodes, the lowest latency;
* **LL128** — 128-byte lines with 8 bytes of flag: 120/128 of the bandwidth (0.92 in
  the tuner) at nearly LL's latency, on NVLink systems only (``ll128`` on a profile).

The tuner gives every (algorithm, protocol) a latency and a bandwidth and runs the
one with the smallest ``latency + bytes / bandwidth``; this module holds its
per-step latencies (µs) by hardware (NVLink, PCIe, network) and its protocol factors,
and :mod:`testbed.oracle.collectives` evaluates them on the profile's calibrated links.
Latencies (tuning.cc ``baseLat`` and ``hwLat``):

* ring all-reduce: ``base + (steps − net steps)·intra + net steps·inter`` with
  ``2(n−1)`` steps of which ``2·nodes`` cross the network; a multi-node Simple ring
  costs ``max(intra, 3 × the CPU's network post overhead)`` per intra step and, once
  every channel's per-rank share is at least 64 bytes, 1.9× (Volta) or 1.4× (Ampere
  and later) its latency ("plateau effect of ring");
* tree all-reduce: ``base + 2((ranks per node − 1)·intra + ⌈log2 nodes⌉·inter)``, its
  bandwidth corrected by size (``treeCorrectionFactor``, 64 B … 256 MB);
* NVLS (NVLink SHARP, one node): one NVLS latency.

Chunked pipelining: a ring step forwards one chunk to the next rank while the previous
chunk is reduced, so a ring pays every step's latency once (``steps × per-step
latency``) plus its bytes at the pipeline's bandwidth — each of its 2(n − 1) steps
moves one chunk, which the bandwidth term already counts. A tree instead forwards whole
chunks stage by stage (the network proxy posts a step once all its lines are written;
Simple chunks also wait at every NVLink hop), so the first chunk crosses every stage
before the pipeline is full: ``(stages − 1) × chunk × channels`` more bytes at the
tree's rate, the chunk a protocol step (:func:`step_payload_bytes`; Simple's shrunk by
enqueue.cc's depth loop, :func:`tree_chunk_bytes`). And NCCL drops channels while a
message gives each thread too little work (:func:`channel_bytes`), so small messages
run on fewer channels than the bandwidth figures assume.
Library versions decide what exists: LL since NCCL 2.3's documentation lists
``NCCL_LL_THRESHOLD``, LL128 since 2.5 (``NCCL_PROTO`` first documented with it),
trees since 2.4, NVLS since 2.17 (:data:`PROTOCOL_SINCE`,
:data:`testbed.systems.profile.ALGORITHM_SINCE`).
"""

from __future__ import annotations

import math

import numpy as np

PROTOCOLS = ("LL", "LL128", "Simple")
#: First NCCL version with each protocol (see the module doc).
PROTOCOL_SINCE = {"LL": (2, 3), "LL128": (2, 5), "Simple": (2, 0)}

#: tuning.cc ``baseLat`` (µs) by algorithm and protocol.
BASE_LAT_US = {"tree": {"LL": 6.8, "LL128": 14.0, "Simple": 0.0},
               "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
               "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0}}
#: tuning.cc ``hwLat`` (µs per step) by hardware, algorithm and protocol.
HW_LAT_US = {
    "nvlink": {"tree": {"LL": 0.6, "LL128": 1.25, "Simple": 28.0},
               "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
               "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 23.0}},
    "pci": {"tree": {"LL": 1.0, "LL128": 1.9, "Simple": 28.0},
            "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0}},
    "net": {"tree": {"LL": 5.0, "LL128": 8.5, "Simple": 28.0},
            "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
            "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 18.0}},
}
#: tuning.cc ``getNetOverhead``: the CPU's cost to post one network operation (µs).
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "other": 1.0}
#: A Simple ring's intra-node steps across nodes pay three network posts.
SIMPLE_NET_OVERHEAD_POSTS = 3
#: tuning.cc ``llMaxBws`` (GB/s, bus bandwidth): LL's cap by GPU generation on one
#: node, by CPU vendor on 2 and on more nodes.
LL_MAX_GBPS = {"node": {"volta": 39.0, "ampere": 87.7, "hopper": 87.7},
               2: {"intel": 39.0, "amd": 22.5, "other": 39.0},
               4: {"intel": 20.4, "amd": 19.0, "other": 20.4}}
#: Ring protocol bandwidth factors (tuning.cc "model refinements"): LL carries 4 bytes
#: of data per 8 (the tuner uses 1/4 for all-reduce and across nodes, 1/3 otherwise),
#: LL128 120 of every 128 (0.92; 0.7 when a rank shares its NIC with no peer).
RING_LL_FACTOR = {"allreduce": 1 / 4, "other": 1 / 3}
LL128_FACTOR = 0.92
LL128_FACTOR_SINGLE_RANK = 0.7
#: Tree protocol factors: LL 1/3.8, LL128 120/128 across nodes (7/9 inside one).
TREE_LL_FACTOR = 1 / 3.8
TREE_LL128_FACTOR = {"node": 7 / 9, "net": 120 / 128}
#: tuning.cc ``treeCorrectionFactor``: trees are slower than their model for medium
#: sizes; by protocol, indexed by log2(bytes / 64) from 64 B to 256 MB.
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9,
              .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
               .7, .8, .9, .9),
}
#: The ring's "plateau effect": a multi-node Simple ring's latency once every channel's
#: share per rank reaches 64 bytes, by GPU generation.
RING_PLATEAU = {"volta": 1.9, "ampere": 1.4, "hopper": 1.4}
PLATEAU_BYTES_PER_RANK_CHANNEL = 64
#: Channels NCCL opens per NIC across nodes (two rings per rail on DGX systems).
CHANNELS_PER_NIC = 2

#: Slots per connection buffer (``NCCL_STEPS``, src/include/device.h).
NCCL_STEPS = 8
#: Connection buffer per protocol (bytes; src/init.cc ``DEFAULT_LL_BUFFSIZE`` = 8 lines per
#: thread x 512 threads x 8 steps x 16-byte lines, ``DEFAULT_LL128_BUFFSIZE`` = 120
#: elements per thread x 640 threads x 8 steps x 8 bytes, ``DEFAULT_BUFFSIZE`` 4 MiB).
BUFF_BYTES = {"LL": 8 * 512 * NCCL_STEPS * 16, "LL128": 120 * 640 * NCCL_STEPS * 8,
              "Simple": 4 * 2**20}
#: Payload share of a step: LL carries 8 bytes of data per 16-byte line, LL128 120 bytes
#: per 128-byte line (enqueue.cc ``computeColl``: ``chunkSize /= 2`` for LL, ``/ LINEELEMS
#: * DATAELEMS`` for LL128).
PAYLOAD_SHARE = {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0}
#: Threads per channel (``NCCL_LL_MAX_NTHREADS`` 512, ``NCCL_LL128_MAX_NTHREADS`` 640,
#: ``NCCL_SIMPLE_MAX_NTHREADS`` 512) and the bytes each must have before NCCL keeps a
#: channel (``NCCL_*_THREAD_THRESHOLD``: 8, 8, 64; a ring's LL threshold times the ranks,
#: tuning.cc): enqueue.cc drops channels while ``nBytes < nc * nt * threshold``.
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
#: Smallest Simple tree chunk NCCL's depth loop leaves (enqueue.cc: halve the 512 KiB
#: step while ``nBytes / (nChannels * chunk)`` is under 8x, 4x and 1x the tree depth, down
#: to 128, 64 and 32 KiB).
TREE_SIMPLE_CHUNK_FLOORS = ((8, 131072), (4, 65536), (1, 32768))


def generation(compute_capability: float | None) -> str:
    """The tuner's GPU generation of a compute capability (None: Ampere)."""
    if compute_capability is None:
        return "ampere"
    if compute_capability >= 9.0:
        return "hopper"
    return "ampere" if compute_capability >= 8.0 else "volta"


def tree_correction(protocol: str, nbytes: float) -> float:
    """tuning.cc's tree bandwidth correction at ``nbytes`` (1 beyond its table)."""
    if nbytes < 64:
        return TREE_CORRECTION[protocol][0]
    index = int(math.log2(nbytes / 64))
    table = TREE_CORRECTION[protocol]
    return table[index] if index < len(table) else 1.0


def ll_max_Bps(nodes: int, gen: str, cpu: str) -> float:  # noqa: N802 - unit suffix
    """LL's bus-bandwidth cap (bytes/s) on ``nodes`` nodes."""
    if nodes <= 1:
        return LL_MAX_GBPS["node"][gen] * 1e9
    return LL_MAX_GBPS[2 if nodes == 2 else 4][cpu] * 1e9


def step_payload_bytes(protocol: str) -> float:
    """Data bytes one step of ``protocol`` carries (a chunk of a tree, a slice of a ring)."""
    return BUFF_BYTES[protocol] / NCCL_STEPS * PAYLOAD_SHARE[protocol]


def channel_bytes(algorithm: str, protocol: str, nranks: int) -> float:
    """Bytes a message needs per channel before NCCL runs that channel: below
    ``channels x this`` it drops channels (enqueue.cc, see :data:`THREAD_THRESHOLD`)."""
    threshold = THREAD_THRESHOLD[protocol] * (nranks if (algorithm, protocol) == ("ring", "LL")
                                              else 1)
    return MAX_THREADS[protocol] * threshold


def tree_chunk_bytes(protocol: str, sizes_bytes, channels: int, depth: int):
    """Bytes of one chunk of a tree all-reduce per channel (vectorised over sizes): a step
    of LL and LL128; Simple's 512 KiB step halved while the message has too few chunks
    for the pipeline's ``depth`` (enqueue.cc), never more than the channel's share."""
    sizes = np.asarray(sizes_bytes, dtype=float)
    chunk = np.full_like(sizes, step_payload_bytes(protocol))
    if protocol == "Simple":
        for mult, floor in TREE_SIMPLE_CHUNK_FLOORS:
            for _ in range(8):
                shrink = (sizes / (channels * chunk) < depth * mult) & (chunk > floor)
                if not shrink.any():
                    break
                chunk = np.where(shrink, chunk / 2, chunk)
    return np.minimum(chunk, sizes / max(channels, 1))


def available(version: tuple[int, int] | None, protocol: str) -> bool:
    """Whether a library version has ``protocol`` (None: not NCCL, Simple only)."""
    if version is None:
        return protocol == "Simple"
    return version >= PROTOCOL_SINCE[protocol]
