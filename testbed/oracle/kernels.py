"""Compute of one training step from the layer IR, layer by layer (issue 18).

Every layer becomes the kernels a GPU runs for it, and each kernel costs what its
roofline allows (Williams, Waterman & Patterson, "Roofline", CACM 2009):

    t_kernel = max(FLOPs / (peak × efficiency), bytes / (HBM bandwidth × achieved share))
               + the device-side gap between dependent kernels

* **GEMM-like kernels** — a convolution is an implicit GEMM (Chetlur et al., "cuDNN",
  2014), three per layer in training: forward ``M = b·|y_spatial|, N = F/G,
  K = (C/G)·Πk``, data gradient ``M = b·|y_spatial|, N = C/G, K = (F/G)·Πk`` and
  weight gradient ``M = F/G, N = (C/G)·Πk, K = b·|y_spatial|``, each on ``G`` groups;
  a fully connected layer is the same with no spatial extent. Their efficiency depends
  on their shape through **tile and wave quantisation** (NVIDIA, "Matrix
  Multiplication Background User's Guide"): the output is cut into ``Tm × Tn`` tiles,
  one per SM at a time, so a GEMM with ``t`` tiles runs ``⌈t / SMs⌉`` waves and uses
  ``M·N / (waves · SMs · Tm · Tn)`` of the machine; the library picks the tile (from
  :data:`TILES`) that finishes first, and tiles smaller than 128 × 128 reuse each loaded
  element less, so they reach a proportionally smaller share of the peak
  (``Tm·Tn/(Tm+Tn) / 64``, capped at 1). Small batches, small channel counts and late,
  small feature maps lose efficiency for that reason; the large-problem efficiency
  itself (``gpu.gemm_efficiency``) is a profile constant with its source.
* **Memory-bound kernels** — batch norm, activations, pooling, residual additions,
  dropout, concatenation, the optimizer update, mixed precision's weight casts — cost
  the bytes they stream over the achieved HBM bandwidth. The bytes are element
  accesses per output element (:data:`UNFUSED` and :data:`FUSED`, read off the
  algorithms: training batch norm reads its input twice — statistics, then the
  normalisation — and writes once; its backward reads the gradient and the input
  twice and writes once) times the bytes of the precision.
* **Precision** sets the peak (``gpu.peak_TFLOPS``) and the bytes of every activation;
  mixed precision keeps fp32 master weights and optimizer state (:mod:`.state`).
* **Software** (:class:`testbed.systems.software.SoftwareStack`) decides how many
  kernels there are — fused stacks fold a ReLU and a residual add into the batch norm
  kernel around them, fused optimizers update every tensor in one multi-tensor launch
  — and what each launch costs the host. The host issues kernels asynchronously, so a
  step costs ``max(GPU time, host time)``: an eager framework is host-bound when the
  kernels are shorter than their launches (small batches), CUDA graphs replace the
  per-kernel host cost by one graph launch per step.

Forward work precedes backward, and the backward of layer ``l`` ends at the time this
module reports per layer (:meth:`StepTimes.backward_done_s`), which the gradient
buckets of :mod:`testbed.oracle.overlap` start from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from testbed.model.ir import Model
from testbed.oracle.device import flop_rate, gemm_share
from testbed.systems.profile import GpuSpec
from testbed.systems.software import SoftwareStack

#: Output tiles the GEMM libraries choose among (CUTLASS/cuDNN tensor-core kernels use
#: 256×128, 128×128, 128×64 and 64×64 thread-block tiles; NVIDIA's matrix-multiplication
#: guide illustrates quantisation with 256×128 and 128×128 tiles).
TILES = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64))
#: Tile size at which a thread block reuses each loaded element enough to feed the
#: tensor cores: ``Tm·Tn/(Tm+Tn)`` of a 128×128 tile (64 MACs per loaded element).
FULL_REUSE = 64.0
#: Smallest slice of a GEMM's depth one split-K block takes (CUTLASS's split-K kernels
#: keep each slice a few main-loop iterations deep: 4 × a 64-deep K tile).
SPLIT_K_MIN_DEPTH = 256.0

#: Element accesses per output element of the memory-bound kernels, (forward, backward),
#: each op in its own kernel (eager frameworks). Batch norm (training): read x for the
#: statistics, read x to normalise, write y; backward: read dy and x for the two
#: reductions, read them again and write dx. ReLU: read, write; backward: read y and dy,
#: write dx. Addition: read two, write one; backward: nothing (autograd hands the same
#: gradient to both inputs). Dropout: read, write the output and the mask; backward:
#: read mask and dy, write dx. Pooling and concatenation read their input and write
#: their output, and the reverse in backward (:func:`_stream_elems` scales by |x|, |y|).
UNFUSED = {"bn": (3.0, 5.0), "relu": (2.0, 3.0), "add": (3.0, 0.0), "dropout": (3.0, 3.0),
           "maxpool": (1.0, 1.0), "avgpool": (1.0, 1.0), "concat": (2.0, 2.0)}
#: The same with the element-wise epilogues fused into the kernel before them (cuDNN's
#: NHWC batch norm with fused add and ReLU, as MXNet and PaddlePaddle use it; XLA fuses
#: the same chains): a ReLU costs no pass forward and one read of its mask backward, an
#: addition one read of the shortcut forward and one write of its gradient backward.
FUSED = {**UNFUSED, "relu": (0.0, 1.0), "add": (1.0, 1.0)}
#: Inference (forward only, ``model.eval()``): batch norm applies its running statistics
#: in one read and one write, dropout is the identity and launches nothing.
INFERENCE = {**UNFUSED, "bn": (2.0, 0.0), "dropout": (0.0, 0.0)}
INFERENCE_FUSED = {**FUSED, "bn": (2.0, 0.0), "dropout": (0.0, 0.0)}
#: Kernels per layer kind and pass, (forward, backward), unfused. A convolution or fully
#: connected layer: one GEMM forward, data and weight gradient backward, plus one kernel
#: each way for its bias. Fused stacks launch no kernel for a ReLU or an addition.
KERNELS = {"conv": (1, 2), "deconv": (1, 2), "fc": (1, 2), "bn": (1, 1), "relu": (1, 1),
           "add": (1, 0), "dropout": (1, 1), "maxpool": (1, 1), "avgpool": (1, 1),
           "concat": (1, 1)}
#: Optimizer kernels per parameter tensor when every tensor is updated by its own
#: kernels (PyTorch's for-loop SGD with momentum and weight decay: the decay, the
#: momentum buffer, the update) and element accesses per parameter (3 reads + 3 writes
#: of fp32 values... counted exactly below), and the tensors one multi-tensor launch of a
#: fused optimizer handles (apex/PyTorch ``multi_tensor_apply``: 110 tensors per chunk).
OPTIMIZER_KERNELS_PER_TENSOR = 3
OPTIMIZER_ACCESSES_UNFUSED = 9      # d=g+wd·p (3), buf=m·buf+d (3), p-=lr·buf (3)
OPTIMIZER_ACCESSES_FUSED = 5        # read g, p, buf; write p, buf
MULTI_TENSOR_CHUNK = 110
#: Bytes of the fp32 master weights, gradients and optimizer state.
FP32_BYTES = 4


@dataclass(frozen=True)
class LayerWork:
    """What one model asks of a GPU per sample, as arrays over kernels (built once per
    model, see :func:`layer_work`). A GEMM's sizes are ``M = m0 + m1·b`` and
    ``K = k0 + k1·b`` on ``groups`` groups; its elements moved ``e0 + e1·b``."""

    model: Model
    # GEMMs (three per weighted layer)
    g_layer: np.ndarray
    g_backward: np.ndarray
    g_m0: np.ndarray
    g_m1: np.ndarray
    g_n: np.ndarray
    g_k0: np.ndarray
    g_k1: np.ndarray
    g_groups: np.ndarray
    g_e0: np.ndarray
    g_e1: np.ndarray
    # memory-bound kernels (one forward and one backward entry per layer that has one)
    s_layer: np.ndarray
    s_backward: np.ndarray
    s_kind: tuple[str, ...]
    s_x: np.ndarray
    s_y: np.ndarray
    # per layer
    kinds: tuple[str, ...]
    weighted: np.ndarray
    biased: np.ndarray
    param_tensors: int
    weight_tensors: int
    parameters: int


_CACHE: dict[int, LayerWork] = {}


def _gemms(model: Model) -> list[tuple]:
    """(layer, backward, m0, m1, n, k0, k1, groups, e0, e1) for every GEMM."""
    rows = []
    for i, layer in enumerate(model.layers):
        if layer.kind not in ("conv", "deconv", "fc"):
            continue
        g = max(layer.groups, 1)
        c, f = layer.in_channels, layer.out_channels
        if layer.kind == "fc":
            # a fully connected layer over a C×H×W input: K = C·H·W, one "kernel tap"
            # per input position (w = (C, F, H, W))
            kk = math.prod(layer.w[2:]) if len(layer.w) > 2 else 1
            spatial, cg, fg, g = 1, c, f, 1
        else:
            kk = math.prod(layer.kernel) if layer.kernel else 1
            spatial = math.prod(layer.y[1:]) if layer.kind == "conv" else math.prod(layer.x[1:])
            cg, fg = c // g, f // g
        w, x, y = layer.weight_params, layer.x_elems, layer.y_elems
        rows.append((i, False, 0, spatial, fg, cg * kk, 0, g, w, x + y))          # forward
        if i > 0:                                                                  # data grad
            rows.append((i, True, 0, spatial, cg, fg * kk, 0, g, w, x + y))
        rows.append((i, True, fg, 0, cg * kk, 0, spatial, g, w, x + y))            # weight grad
    return rows


def layer_work(model: Model) -> LayerWork:
    """The cached :class:`LayerWork` of a model (its layers' GEMMs and streams)."""
    hit = _CACHE.get(id(model))
    if hit is not None and hit.model is model:
        return hit
    rows = _gemms(model)
    cols = list(zip(*rows, strict=True)) if rows else [()] * 10
    streams = [(i, bwd, layer.kind, layer.x_elems, layer.y_elems)
               for i, layer in enumerate(model.layers) if layer.kind in UNFUSED
               for bwd in (False, True)]
    scols = list(zip(*streams, strict=True)) if streams else [()] * 5
    weighted = np.array([lyr.kind in ("conv", "deconv", "fc") for lyr in model.layers])
    biased = np.array([lyr.kind in ("conv", "deconv", "fc") and lyr.extra_params > 0
                       for lyr in model.layers])
    tensors = int(weighted.sum() + biased.sum()
                  + 2 * sum(1 for lyr in model.layers if lyr.kind == "bn"))
    arr = [np.asarray(c, dtype=float) for c in cols]
    work = LayerWork(
        model=model, g_layer=np.asarray(cols[0], dtype=int), g_backward=np.asarray(cols[1], dtype=bool),
        g_m0=arr[2], g_m1=arr[3], g_n=arr[4], g_k0=arr[5], g_k1=arr[6], g_groups=arr[7],
        g_e0=arr[8], g_e1=arr[9],
        s_layer=np.asarray(scols[0], dtype=int), s_backward=np.asarray(scols[1], dtype=bool),
        s_kind=tuple(scols[2]), s_x=np.asarray(scols[3], dtype=float),
        s_y=np.asarray(scols[4], dtype=float),
        kinds=tuple(lyr.kind for lyr in model.layers), weighted=weighted, biased=biased,
        param_tensors=tensors, weight_tensors=int(weighted.sum()),
        parameters=model.parameters)
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[id(model)] = work
    return work


def gemm_efficiency(m: np.ndarray, n: np.ndarray, k: np.ndarray, groups: np.ndarray,
                    sms: int, split: float = 1.0, tile: tuple[int, int] | None = None
                    ) -> np.ndarray:
    """Share of the GPU's large-GEMM rate that GEMMs of output ``m × n`` on ``groups``
    groups reach with their depth ``k`` cut into ``split`` slices (split-K): useful /
    issued tile area over the waves × the tile's reuse factor, for ``tile`` or the
    best of :data:`TILES` (see the module doc)."""
    best = np.zeros_like(m, dtype=float)
    for tm, tn in (TILES if tile is None else (tile,)):
        tiles = np.ceil(m / tm) * np.ceil(n / tn) * groups
        waves = np.ceil(tiles * split / sms)
        util = m * n * groups * split / np.maximum(waves * sms * tm * tn, 1.0)
        reuse = min(1.0, tm * tn / (tm + tn) / FULL_REUSE)
        best = np.maximum(best, util * reuse)
    return np.minimum(best, 1.0)


def _split_ks(sms: int) -> tuple[float, ...]:
    """Split-K factors a library may pick: 1 and powers of two up to the SM count."""
    out, s = [1.0], 2
    while s <= sms:
        out.append(float(s))
        s *= 2
    return tuple(out)


def gemm_time_s(m: np.ndarray, n: np.ndarray, k: np.ndarray, groups: np.ndarray,
                base_bytes: np.ndarray, peak_flops: float, bw_Bps: float,  # noqa: N803
                sms: int) -> np.ndarray:
    """Seconds of each GEMM: the fastest (tile, split-K) configuration's
    ``max(FLOPs / (peak × efficiency), bytes / bandwidth)``. A split of the depth over
    idle SMs (cuBLAS's and cuDNN's split-K weight-gradient kernels) runs slices at
    least :data:`SPLIT_K_MIN_DEPTH` deep (a shallower depth is padded) and writes and
    re-reads its fp32 partial tiles. Each configuration's time grows with ``m`` and
    ``k``, so their minimum does too: a larger batch never runs faster."""
    best = np.full_like(m, np.inf, dtype=float)
    for split in _split_ks(sms):
        # each slice is at least SPLIT_K_MIN_DEPTH deep: a shallower GEMM pays for the
        # padded depth (so a larger k never runs slower than a smaller one)
        depth = k if split == 1.0 else np.maximum(k, split * SPLIT_K_MIN_DEPTH)
        flops = 2.0 * m * n * depth * groups
        partial = 0.0 if split == 1.0 else 2.0 * split * m * n * groups * FP32_BYTES
        memory = (base_bytes + partial) / bw_Bps
        for tile in TILES:
            eff = gemm_efficiency(m, n, k, groups, sms, split, tile)
            t = np.maximum(flops / (peak_flops * np.maximum(eff, 1e-12)), memory)
            best = np.minimum(best, t)
    return best


@dataclass(frozen=True)
class StepTimes:
    """One GPU's step on ``batch`` samples, per layer (seconds)."""

    forward_gpu_s: np.ndarray       # per layer
    backward_gpu_s: np.ndarray      # per layer
    optimizer_gpu_s: float
    host_s: float                   # what the host spends issuing the step's kernels
    kernels: int
    source: str
    backward_host_s: np.ndarray | None = None   # per layer: host time to issue its backward

    @property
    def gpu_s(self) -> float:
        return float(self.forward_gpu_s.sum() + self.backward_gpu_s.sum()) + self.optimizer_gpu_s

    @property
    def total_s(self) -> float:
        """Forward + backward + optimizer: the GPU's time, or the host's when the host
        cannot issue the kernels as fast as the GPU runs them."""
        return max(self.gpu_s, self.host_s)

    @property
    def host_bound(self) -> bool:
        return self.host_s > self.gpu_s

    def backward_done_s(self, scale: float = 1.0) -> np.ndarray:
        """Per layer: seconds after the backward pass starts at which its gradient is
        ready — backward runs from the last layer to the first, and a layer is done once
        the GPU has run its kernels (``scale`` × their times) and the host has issued
        them, whichever is later."""
        gpu = (self.backward_gpu_s * scale)[::-1].cumsum()[::-1]
        if self.backward_host_s is None:
            return gpu
        return np.maximum(gpu, self.backward_host_s[::-1].cumsum()[::-1])


def _stream_elems(work: LayerWork, table: dict[str, tuple[float, float]]) -> np.ndarray:
    """Element accesses per sample of every memory-bound entry."""
    out = np.empty(len(work.s_kind))
    for j, kind in enumerate(work.s_kind):
        fwd, bwd = table[kind]
        passes = bwd if work.s_backward[j] else fwd
        if kind in ("maxpool", "avgpool"):
            out[j] = passes * (work.s_x[j] + work.s_y[j])
        else:
            out[j] = passes * work.s_y[j]
    return out


def _optimizer(work: LayerWork, gpu: GpuSpec, stack: SoftwareStack, mixed: bool,
               bw_Bps: float) -> tuple[float, int]:  # noqa: N803 - unit suffix
    """(GPU seconds, kernels) of the optimizer step and mixed precision's extra passes
    (the fp16 copy of every weight each forward, the gradient unscale and check)."""
    params, tensors = float(work.parameters), work.param_tensors
    if stack.fused_optimizer:
        accesses, kernels = OPTIMIZER_ACCESSES_FUSED, math.ceil(tensors / MULTI_TENSOR_CHUNK)
    else:
        accesses, kernels = OPTIMIZER_ACCESSES_UNFUSED, OPTIMIZER_KERNELS_PER_TENSOR * tensors
    nbytes = params * accesses * FP32_BYTES
    if mixed:
        # cast of the fp32 weights to half precision (read 4, write 2 bytes), and the
        # unscale + finite check of the fp32 gradients (read, write)
        nbytes += params * (FP32_BYTES + 2) + params * 2 * FP32_BYTES
        kernels += (work.weight_tensors if not stack.fused_optimizer else 1) + 1
    return nbytes / bw_Bps + kernels * stack.kernel_gap_us * 1e-6, kernels


def step_times(model: Model, batch: float, gpu: GpuSpec, stack: SoftwareStack,
               precision: str, dtype_bytes: int, *, training: bool = True) -> StepTimes:
    """Per-layer forward and backward seconds of one GPU's step on ``batch`` samples at
    ``precision`` (``dtype_bytes`` per activation), the optimizer step and what the host
    spends issuing it all (see the module doc). ``training=False``: forward only."""
    work = layer_work(model)
    n_layers = len(work.kinds)
    peak = flop_rate(gpu, precision, gemm_share(gpu, precision))
    bw = gpu.achieved_memory_Bps
    gap = stack.kernel_gap_us * 1e-6
    fwd = np.zeros(n_layers)
    bwd = np.zeros(n_layers)
    bwd_kernels = np.zeros(n_layers)
    kernels = 0
    if len(work.g_layer):
        keep = np.ones(len(work.g_layer), dtype=bool) if training else ~work.g_backward
        m = work.g_m0 + work.g_m1 * batch
        k = work.g_k0 + work.g_k1 * batch
        nbytes = (work.g_e0 + work.g_e1 * batch) * dtype_bytes
        t = gemm_time_s(m, work.g_n, k, work.g_groups, nbytes, peak, bw,
                        gpu.sm_count or 1) + gap
        t = np.where(keep, t, 0.0)
        np.add.at(fwd, work.g_layer[~work.g_backward], t[~work.g_backward])
        np.add.at(bwd, work.g_layer[work.g_backward], t[work.g_backward])
        np.add.at(bwd_kernels, work.g_layer[work.g_backward], keep[work.g_backward])
        kernels += int(keep.sum())
    if len(work.s_layer):
        if training:
            table = FUSED if stack.fusion else UNFUSED
        else:
            table = INFERENCE_FUSED if stack.fusion else INFERENCE
        elems = _stream_elems(work, table) * batch
        live = elems > 0
        if not training:
            live &= ~work.s_backward
        t = np.where(live, elems * dtype_bytes / bw + gap, 0.0)
        np.add.at(fwd, work.s_layer[~work.s_backward], t[~work.s_backward])
        np.add.at(bwd, work.s_layer[work.s_backward], t[work.s_backward])
        np.add.at(bwd_kernels, work.s_layer[work.s_backward], live[work.s_backward])
        kernels += int(live.sum())
    # biases: one kernel each way (fused into the GEMM epilogue by fused stacks)
    if not stack.fusion:
        kernels += int(work.biased.sum()) * (2 if training else 1)
    mixed = dtype_bytes < FP32_BYTES
    opt_s, opt_kernels = (_optimizer(work, gpu, stack, mixed, bw) if training else (0.0, 0))
    if mixed and not training and not stack.fusion:
        kernels += work.weight_tensors         # autocast's weight casts
    kernels += opt_kernels
    host = (stack.graph_launch_us * 1e-6 if stack.cuda_graphs
            else kernels * stack.launch_us * 1e-6 + n_layers * stack.layer_us * 1e-6)
    bwd_host = None if stack.cuda_graphs else bwd_kernels * stack.launch_us * 1e-6
    return StepTimes(fwd, bwd, opt_s, host, kernels,
                     f"compute per layer ({stack.name}: roofline with tile waves)", bwd_host)
