"""How the fitted constants of the shipped profiles were solved (issue 18), so a test
can re-solve them from their named data sets and compare with the committed values.

Each fit has one unknown per equation (no least squares: nothing is tuned to a set it
does not name), solved in this order because each later one depends on the earlier:

1. ``software.stacks.pytorch.launch_us`` and ``layer_us`` from the batch-1 inference
   latencies of ResNet-50 on one V100 (``dle-pytorch-rn50-v100-infer-b1``): at batch 1
   the step is host-bound, FP32 launches one kernel per layer, AMP adds one weight cast
   per convolution and fully connected layer;
2. ``gpu.gemm_efficiency`` of each GPU and precision from its 1-GPU training rate
   (``dle-pytorch-rn50-dgx1-16gb``, ``dle-pytorch-rn50-dgxa100``);
3. ``software.stacks.pytorch.decode_core_ms`` from the 8-GPU mixed-precision rate of the
   DGX-1 16GB table, where five CPU cores feed each GPU;
4. ``software.stacks.*.step_jitter_us`` of the DGX-class clusters from the 64-GPU rate of
   NVIDIA's MLPerf Training v4.0 ResNet-50 run on 8 DGX H100 (``mlperf-v4.0-rn50-h100-
   8node``: 50 samples per GPU, 314,000 img/s): what the step loses beyond compute and
   the exposed all-reduce is the wait for the slowest of the 64 GPUs.

Run ``python -m tests.oracle.fit_constants`` to print them.
"""

from __future__ import annotations

from scipy.optimize import brentq

from testbed.model.registry import get_model
from testbed.oracle import predict
from testbed.oracle.device import software_stack
from testbed.oracle.kernels import layer_work, step_times
from testbed.systems.profile import load_system

#: (system, precision, batch, published 1-GPU img/s) per fitted GEMM efficiency
GEMM_ROWS = {("dgx1-v100", "fp32"): (112, 367.0), ("dgx1-v100", "fp16"): (256, 1200.0),
             ("a100-cluster", "tf32"): (256, 938.0), ("a100-cluster", "fp16"): (256, 2470.0)}
#: batch-1 inference latencies (s) on one V100, FP32 and AMP
INFER_B1_S = {"fp32": 10.37e-3, "fp16": 12.78e-3}
#: the DGX-1 16GB AMP 8-GPU rate per GPU the decode cost is solved from
DECODE_ROW = ("dgx1-v100", "fp16", 256, 8322 / 8)
#: (system, stack, GPUs, samples per GPU, published img/s per GPU) the step jitter is
#: solved from: MLPerf Training v4.0, NVIDIA eos_n8_ngc24.04_mxnet (8 x DGX H100)
JITTER_ROW = ("h100-cluster", "mxnet", 64, 50, 314_000 / 64)


def fit_launch() -> tuple[float, float]:
    """(launch_us, layer_us): AMP's extra kernels (one cast per weight tensor) cost the
    latency difference; the rest of FP32's latency is one launch plus one layer call
    per layer."""
    work = layer_work(get_model("resnet50"))
    casts = work.weight_tensors
    system = load_system("dgx1-v100")
    stack = software_stack(system)
    fp32 = step_times(get_model("resnet50"), 1, system.gpu, stack, "fp32", 4, training=False)
    launch = (INFER_B1_S["fp16"] - INFER_B1_S["fp32"]) / casts
    layers = len(work.kinds)
    layer = (INFER_B1_S["fp32"] - fp32.kernels * launch) / layers
    return launch * 1e6, layer * 1e6


def _gpu_with(system, precision: str, eff: float):
    table = dict(system.gpu.gemm_efficiency)
    table["fp16" if precision in ("fp16", "bf16") else precision] = eff
    return system.model_copy(update={"gpu": system.gpu.model_copy(
        update={"gemm_efficiency": table})})


def fit_gemm(name: str, precision: str) -> float:
    """The GEMM efficiency that gives the published 1-GPU training rate."""
    batch, published = GEMM_ROWS[(name, precision)]
    base = load_system(name)

    def gap(eff: float) -> float:
        e = predict(_gpu_with(base, precision, eff), "resnet50", "serial", 1, batch,
                    precision=precision)
        return e.samples_per_s - published

    return brentq(gap, 0.05, 1.0, xtol=1e-6)


def fit_decode() -> float:
    """decode_core_ms that makes the DGX-1 AMP 8-GPU rate input-bound at the published
    figure (the loader's cores, not the GPUs, set it)."""
    name, precision, batch, published = DECODE_ROW
    system = load_system(name)
    stack = software_stack(system)
    cores = min(system.node.cpu_cores / system.node.gpus_per_node,
                stack.loader_workers_per_gpu or 1e9)
    return cores / published * 1e3


def _with_jitter(system, jitter_us: float):
    stacks = {k: v.model_copy(update={"step_jitter_us": jitter_us})
              for k, v in system.software.stacks.items()}
    return system.model_copy(update={"software": system.software.model_copy(
        update={"stacks": stacks})})


def fit_jitter() -> float:
    """step_jitter_us that makes the 64-GPU H100 rate of :data:`JITTER_ROW` come out."""
    name, stack, gpus, batch, published = JITTER_ROW
    base = load_system(name)

    def gap(jitter_us: float) -> float:
        e = predict(_with_jitter(base, jitter_us), "resnet50", "data", gpus, gpus * batch,
                    precision="fp16", software=stack)
        return e.samples_per_s / gpus - published

    return brentq(gap, 0.0, 20_000.0, xtol=1e-3)


def main() -> None:
    launch, layer = fit_launch()
    print(f"pytorch launch_us {launch:.2f}, layer_us {layer:.2f}")
    for (name, precision) in GEMM_ROWS:
        print(f"{name} gemm_efficiency[{precision}] = {fit_gemm(name, precision):.4f}")
    print(f"pytorch decode_core_ms {fit_decode():.3f}")
    print(f"step_jitter_us {fit_jitter():.1f}")


if __name__ == "__main__":
    main()
