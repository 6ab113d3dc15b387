"""Published figures the oracle is checked against, in named data sets (issue 18).

Every figure belongs to one data set; a profile constant fitted on a data set names it
in its ``sources`` (``kind: fit, data: [...]``), and :func:`fitted_sets` collects those
names from the shipped profiles. A figure of a fitted set is reported as *fitted* and
never counted as validation; the rest are *held out* (:func:`split`). Sources:

* ``dle-pytorch-rn50-*`` — NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/
  resnet50v1.5/README.md (pytorch-21.03 NGC), "Training performance" and "Inference
  performance" tables; batch sizes from PyTorch/Classification/ConvNets/configs.yml
  (DGX-1 V100: FP32 112, AMP 256; DGX A100: 256 both).
* ``nccl-*`` — NVIDIA/nccl-tests and NVIDIA/nccl GitHub issues, figures stated by the
  reporters or by NVIDIA engineers (issue numbers in the set names).
* ``mlperf-v0.7-*``, ``mlperf-v1.0-*``, ``mlperf-v1.1-*``, ``mlperf-v4.0-*`` — NVIDIA's
  MLPerf Training ResNet-50 submissions (MXNet, fp16, DALI, LARS), the throughput the
  result logs record (mlcommons/training_results_v0.7, v1.0, v1.1 and v4.0,
  ``NVIDIA/results/<system>/resnet/result_0.txt``: ``Speed:`` lines and the per-epoch
  ``tracked_stats`` / ``throughput`` entries over the steady epochs, evaluation excluded;
  samples per GPU from the same logs' ``d_batch_size``). Per-GPU images/s; the large
  runs at 15-51 samples per GPU test what a step loses at scale.

The MLPerf Training v2.0–v3.1 results, DeepLearningExamples' MXNet, TensorFlow and
PaddlePaddle tables, deepops, stas00/ml-engineering's all-reduce charts and the ABCI
runs above 16 GPUs are held out by issue 18 and are not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import yaml

from testbed.io.packaged import data_dir
from testbed.model.registry import get_model
from testbed.oracle import predict
from testbed.oracle.collectives import Fabric, bus_factor
from testbed.oracle.device import software_stack
from testbed.oracle.kernels import step_times
from testbed.systems.profile import load_system


@dataclass(frozen=True)
class Figure:
    """One published number and how the oracle predicts it (``kind`` says which
    quantity: training images/s per GPU, inference images/s, all-reduce bus bandwidth
    in GB/s, or a mean bus bandwidth over sizes)."""

    name: str
    data_set: str
    kind: str
    system: str
    published: float
    args: dict = field(default_factory=dict)

    def predicted(self) -> float:
        return PREDICT[self.kind](self)


def _train(f: Figure) -> float:
    a = f.args
    gpus, batch = a["gpus"], a["batch"]
    e = predict(f.system, a.get("model", "resnet50"), "serial" if gpus == 1 else "data", gpus,
                batch * gpus, precision=a["precision"], software=a.get("software"))
    assert e.feasible, e.reason
    return e.samples_per_s / gpus


def _fabric(f: Figure) -> Fabric:
    """The network of a collective figure's system with the figure's overrides (NICs per
    node, host CPU vendor) applied."""
    a = f.args
    system = load_system(f.system)
    net = system.network.model_copy(update=a.get("network", {}))
    return Fabric.of(system.model_copy(update={
        "network": net, "node": system.node.model_copy(update=a.get("node", {}))}))


def _allreduce_us(f: Figure) -> float:
    """Microseconds of one all-reduce of a figure's size (small sizes: the latency)."""
    return _fabric(f).allreduce(f.args["bytes"], f.args["gpus"]).time_s * 1e6


def _infer(f: Figure) -> float:
    a = f.args
    system = load_system(f.system)
    model = get_model(a.get("model", "resnet50"))
    nbytes = 4 if a["precision"] in ("fp32", "tf32") else 2
    t = step_times(model, a["batch"], system.gpu, software_stack(system, a.get("software")),
                   a["precision"], nbytes, training=False)
    return a["batch"] / t.total_s


def _busbw(f: Figure) -> float:
    a = f.args
    fabric = _fabric(f)
    n, nbytes = a["gpus"], a["bytes"]
    if a.get("algorithm"):
        plans = [p for p in fabric.plans("allreduce", n) if p.algorithm == a["algorithm"]]
        t = min(fabric.plan_time(p, "allreduce", nbytes, n, 1) for p in plans)
    else:
        t = fabric.allreduce(nbytes, n).time_s
    return nbytes / t * bus_factor("allreduce", n) / 1e9


def _mean_busbw(f: Figure) -> float:
    a = f.args
    fabric = _fabric(f)
    n = a["gpus"]
    sizes = np.arange(a["from_bytes"], a["to_bytes"] + 1, a["step_bytes"], dtype=float)
    bw = [s / fabric.allreduce(s, n).time_s * bus_factor("allreduce", n) / 1e9 for s in sizes]
    return float(np.mean(bw))


PREDICT = {"train_img_s_per_gpu": _train, "infer_img_s": _infer, "busbw_GBps": _busbw,
           "mean_busbw_GBps": _mean_busbw, "allreduce_us": _allreduce_us}

GiB = 2**30
MiB = 2**20


def _t(name, data_set, system, precision, batch, gpus, published, **kw) -> Figure:
    return Figure(name, data_set, "train_img_s_per_gpu", system, published,
                  dict(precision=precision, batch=batch, gpus=gpus, **kw))


def _i(name, data_set, system, precision, batch, published) -> Figure:
    return Figure(name, data_set, "infer_img_s", system, published,
                  dict(precision=precision, batch=batch))


FIGURES: tuple[Figure, ...] = (
    # DeepLearningExamples PyTorch ResNet-50 v1.5 training, images/s per GPU
    _t("DGX A100 TF32 1 GPU", "dle-pytorch-rn50-dgxa100", "a100-cluster", "tf32", 256, 1, 938.0),
    _t("DGX A100 TF32 8 GPUs", "dle-pytorch-rn50-dgxa100", "a100-cluster", "tf32", 256, 8,
       7248 / 8),
    _t("DGX A100 AMP 1 GPU", "dle-pytorch-rn50-dgxa100", "a100-cluster", "bf16", 256, 1, 2470.0),
    _t("DGX A100 AMP 8 GPUs", "dle-pytorch-rn50-dgxa100", "a100-cluster", "bf16", 256, 8,
       16621 / 8),
    _t("DGX-1 16GB FP32 1 GPU", "dle-pytorch-rn50-dgx1-16gb", "dgx1-v100", "fp32", 112, 1, 367.0),
    _t("DGX-1 16GB FP32 8 GPUs", "dle-pytorch-rn50-dgx1-16gb", "dgx1-v100", "fp32", 112, 8,
       2855 / 8),
    _t("DGX-1 16GB AMP 1 GPU", "dle-pytorch-rn50-dgx1-16gb", "dgx1-v100", "fp16", 256, 1, 1200.0),
    _t("DGX-1 16GB AMP 8 GPUs", "dle-pytorch-rn50-dgx1-16gb", "dgx1-v100", "fp16", 256, 8,
       8322 / 8),
    _t("DGX-1 32GB FP32 1 GPU", "dle-pytorch-rn50-dgx1-32gb", "dgx1-v100", "fp32", 112, 1, 356.0),
    _t("DGX-1 32GB FP32 8 GPUs", "dle-pytorch-rn50-dgx1-32gb", "dgx1-v100", "fp32", 112, 8,
       2766 / 8),
    _t("DGX-1 32GB AMP 1 GPU", "dle-pytorch-rn50-dgx1-32gb", "dgx1-v100", "fp16", 256, 1, 1156.0),
    _t("DGX-1 32GB AMP 8 GPUs", "dle-pytorch-rn50-dgx1-32gb", "dgx1-v100", "fp16", 256, 8,
       8056 / 8),
    # DeepLearningExamples PyTorch ResNet-50 v1.5 inference on one V100 16GB, images/s
    _i("V100 FP32 inference batch 1", "dle-pytorch-rn50-v100-infer-b1", "dgx1-v100", "fp32", 1,
       96.0),
    _i("V100 AMP inference batch 1", "dle-pytorch-rn50-v100-infer-b1", "dgx1-v100", "fp16", 1,
       78.0),
    *(_i(f"V100 FP32 inference batch {b}", "dle-pytorch-rn50-v100-infer", "dgx1-v100", "fp32",
         b, v) for b, v in ((2, 196), (4, 386), (8, 709), (16, 1023), (32, 1127), (64, 1200),
                            (128, 1229), (256, 1261))),
    *(_i(f"V100 AMP inference batch {b}", "dle-pytorch-rn50-v100-infer", "dgx1-v100", "fp16",
         b, v) for b, v in ((2, 154), (4, 300), (8, 595), (16, 1178), (32, 2146), (64, 2984),
                            (128, 3249), (256, 3382))),
    # nccl-tests all-reduce bus bandwidth, GB/s
    Figure("8 x A100 all-reduce, 8 GiB", "nccl-tests-175-a100-node", "busbw_GBps", "a100-cluster",
           232.54, dict(gpus=8, bytes=8 * GiB)),
    Figure("2 x DGX A100 all-reduce, 8 GiB", "nccl-812-a100-2node", "busbw_GBps", "a100-cluster",
           192.0, dict(gpus=16, bytes=8 * GiB, algorithm="ring")),
    Figure("8 x H100 all-reduce (NVLS), 8 GiB", "nccl-tests-212-h100-node", "busbw_GBps",
           "h100-cluster", 480.0, dict(gpus=8, bytes=8 * GiB)),
    Figure("8 x H100 ring all-reduce, 8 GiB", "nccl-tests-212-h100-node", "busbw_GBps",
           "h100-cluster", 370.0, dict(gpus=8, bytes=8 * GiB, algorithm="ring")),
    Figure("2 x 8 H100 ring, 8 x NDR", "nccl-tests-290-ndr", "busbw_GBps", "h100-cluster",
           8 * 47.0, dict(gpus=16, bytes=8 * GiB, algorithm="ring")),
    Figure("8 x H200 all-reduce, 8 GiB", "nccl-tests-272-h200-node", "busbw_GBps",
           "h200-cluster", 475.0, dict(gpus=8, bytes=8 * GiB)),
    # three servers of 8 x A100-SXM4-40GB with 4 HDR NICs each, 24 ranks, sizes 1 MiB to
    # 128 MiB in 1 MiB steps: "the average performance is about 84.8GB/s and peak
    # performance reaches about 96GB/s" (NVIDIA/nccl-tests#119; Xeon Platinum 8358 hosts)
    Figure("3 x 8 A100, 4 HDR: mean busbw 1-128 MiB", "nccl-tests-119-a100-3node",
           "mean_busbw_GBps", "a100-cluster", 84.8,
           dict(gpus=24, from_bytes=MiB, to_bytes=128 * MiB, step_bytes=MiB,
                network={"nics_per_node": 4}, node={"cpu_vendor": "intel"})),
    Figure("3 x 8 A100, 4 HDR: all-reduce 128 MiB", "nccl-tests-119-a100-3node", "busbw_GBps",
           "a100-cluster", 96.0, dict(gpus=24, bytes=128 * MiB, network={"nics_per_node": 4},
                                      node={"cpu_vendor": "intel"})),
    # 16 nodes of 8 x H100, NCCL 2.20.5: "the busbw for 67108864B ... sometimes can reach a
    # normal value like 150GB/s" (NVIDIA/nccl#1469); the same table's smallest sizes
    # (16-128 B) take 62 us
    Figure("16 x 8 H100: all-reduce 64 MiB", "nccl-1469-h100-16node", "busbw_GBps",
           "h100-cluster", 150.0, dict(gpus=128, bytes=64 * MiB)),
    Figure("16 x 8 H100: all-reduce 16 B latency (us)", "nccl-1469-h100-16node",
           "allreduce_us", "h100-cluster", 62.2, dict(gpus=128, bytes=16)),
    # 32 nodes of 8 x A100-SXM4 with 4 HDR NICs each: 16-128 B take 63-65 us
    # (NVIDIA/nccl#652)
    Figure("32 x 8 A100, 4 HDR: all-reduce 16 B latency (us)", "nccl-652-a100-32node",
           "allreduce_us", "a100-cluster", 63.5,
           dict(gpus=256, bytes=16, network={"nics_per_node": 4}, node={"cpu_vendor": "intel"})),
    # NVIDIA MLPerf Training ResNet-50 (MXNet, fp16), images/s per GPU (module doc)
    _t("MLPerf v4.0 8 x 8 H100, 50 per GPU", "mlperf-v4.0-rn50-h100-8node", "h100-cluster",
       "fp16", 50, 64, 314_000 / 64, software="mxnet"),
    _t("MLPerf v4.0 1 x 8 H100, 400 per GPU", "mlperf-v4.0-rn50-h100-1node", "h100-cluster",
       "fp16", 400, 8, 57_209 / 8, software="mxnet"),
    _t("MLPerf v4.0 316 x 8 H100, 16 per GPU", "mlperf-v4.0-rn50-h100-316node", "h100-cluster",
       "fp16", 16, 2528, 6_970_000 / 2528, software="mxnet"),
    _t("MLPerf v1.1 1 x 8 A100, 408 per GPU", "mlperf-v1.1-rn50-a100", "a100-cluster", "fp16",
       408, 8, 26_350 / 8, software="mxnet"),
    _t("MLPerf v1.1 8 x 8 A100, 51 per GPU", "mlperf-v1.1-rn50-a100", "a100-cluster", "fp16",
       51, 64, 166_000 / 64, software="mxnet"),
    _t("MLPerf v1.1 128 x 8 A100, 35 per GPU", "mlperf-v1.1-rn50-a100", "a100-cluster", "fp16",
       35, 1024, 2_280_000 / 1024, software="mxnet"),
    _t("MLPerf v1.0 1 x 8 A100, 408 per GPU", "mlperf-v1.0-rn50-a100", "a100-cluster", "fp16",
       408, 8, 26_750 / 8, software="mxnet"),
    _t("MLPerf v1.0 8 x 8 A100, 204 per GPU", "mlperf-v1.0-rn50-a100", "a100-cluster", "fp16",
       204, 64, 199_200 / 64, software="mxnet"),
    _t("MLPerf v0.7 1 x 8 A100, 408 per GPU", "mlperf-v0.7-rn50-a100", "a100-cluster", "fp16",
       408, 8, 22_590 / 8, software="mxnet"),
)


def fitted_sets() -> set[str]:
    """Data sets some constant of a shipped profile was fitted on (its ``sources``)."""
    out: set[str] = set()
    for path in sorted(data_dir("systems").glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        for src in (data.get("sources") or {}).values():
            if src.get("kind") == "fit":
                out.update(src.get("data", ()))
    return out


def ratio(predicted: float, published: float) -> float:
    """min/max of the two: 1 is exact, 0.8 is 25 % off either way."""
    return min(predicted, published) / max(predicted, published)


def split() -> tuple[list[Figure], list[Figure]]:
    """(fitted, held-out) figures."""
    fitted = fitted_sets()
    return ([f for f in FIGURES if f.data_set in fitted],
            [f for f in FIGURES if f.data_set not in fitted])


def accuracy_table(title: str, scored: list[tuple[Figure, float]]) -> str:
    """A markdown table of ``(figure, predicted)`` pairs with their ratios and the
    median and worst ratio (what the README quotes)."""
    rows = [f"| {f.data_set} | {f.name} | {f.published:,.1f} | {p:,.1f} | "
            f"{ratio(p, f.published):.3f} |" for f, p in scored]
    ratios = sorted(ratio(p, f.published) for f, p in scored)
    median = ratios[len(ratios) // 2] if len(ratios) % 2 else (
        (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2)
    head = [f"{title}: {len(ratios)} figures, median ratio {median:.3f}, worst {ratios[0]:.3f}",
            "", "| data set | figure | published | oracle | ratio |", "|---|---|---|---|---|"]
    return "\n".join(head + rows)
