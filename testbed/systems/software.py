"""The software stack of a profile: the ``software:`` section (issue 18).

The same GPU runs the same network at very different speeds under different software:
an eager framework launches every operator from Python, one kernel at a time; CUDA
graphs replay a captured step with one launch; graph compilers (XLA, MXNet's symbolic
executor with cuDNN's fused batch norm) fold ReLU and residual additions into the
kernels around them; fused optimizers update every tensor in a few multi-tensor
launches; data loaders decode on CPU cores or on the GPU. A :class:`SoftwareStack`
holds those choices as data, each value with its source in the profile's ``sources``;
the oracle's per-layer compute (:mod:`testbed.oracle.kernels`), its input pipeline and
its gradient overlap (:mod:`testbed.oracle.overlap`) read them.

A request names a stack (``Request.software``, ``--software``) by its key or by one of
its ``frameworks`` aliases; without a name the section's ``default`` applies
(:func:`testbed.oracle.device.software_stack` chooses; a profile without the section
stands for its ``launch_us_per_layer`` and ``overlap_allreduce``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from testbed.io.schema import Strict

#: Bounds of a stack's numbers: no launch takes a second, no sample takes an hour to
#: decode, no bucket is larger than a terabyte.
MAX_US = 1e6
MAX_CORE_MS = 3.6e6
MAX_BUCKET_MB = 1e6


class SoftwareStack(Strict):
    """One framework configuration (see the module doc)."""

    description: str = ""
    frameworks: tuple[str, ...] = Field(
        default=(), description="names that select this stack (pytorch, mxnet, …)")
    launch_us: float = Field(ge=0, le=MAX_US,
                             description="host time to issue one kernel (eager dispatch)")
    layer_us: float = Field(default=0.0, ge=0, le=MAX_US,
                            description="host time per layer of the forward pass beyond "
                                        "its kernels (an eager framework's module call)")
    cuda_graphs: bool = Field(default=False,
                              description="the step is replayed as one captured CUDA graph")
    graph_launch_us: float = Field(default=0.0, ge=0, le=MAX_US,
                                   description="host time to launch the step's graph")
    kernel_gap_us: float = Field(ge=0, le=MAX_US,
                                 description="device idle time between dependent kernels")
    fusion: bool = Field(default=False,
                         description="ReLU and residual additions fused into batch norm, "
                                     "biases into GEMM epilogues")
    fused_optimizer: bool = Field(default=False,
                                  description="multi-tensor optimizer update")
    data_loader: Literal["cpu", "gpu"] = Field(
        default="cpu", description="where input samples are decoded and augmented")
    loader_workers_per_gpu: int | None = Field(
        default=None, gt=0, le=4096,
        description="CPU loader processes per GPU (None: the node's cores shared)")
    decode_core_ms: float = Field(
        default=0.0, ge=0, le=MAX_CORE_MS,
        description="CPU core-milliseconds to read, decode and augment one sample")
    gpu_decode_us: float = Field(
        default=0.0, ge=0, le=MAX_US,
        description="GPU microseconds per sample when the loader decodes on the GPU")
    gradient_allreduce: Literal["buckets", "after-backward"] = Field(
        default="buckets",
        description="buckets all-reduced while backward runs (DDP, Horovod), or one "
                    "all-reduce after backward (ChainerMN)")
    multi_node_allreduce: Literal["buckets", "after-backward"] | None = Field(
        default=None,
        description="how gradients are all-reduced once the job spans nodes, where it "
                    "differs from gradient_allreduce (NVIDIA's MLPerf MXNet runs one "
                    "fused all-reduce after backward across nodes, 20 overlapped groups "
                    "inside one)")
    step_jitter_us: float = Field(
        default=0.0, ge=0, le=MAX_US,
        description="standard deviation of one GPU's step time (us): a synchronous step "
                    "waits for the slowest of its GPUs")
    fp32_gradients: bool = Field(
        default=False, description="gradients all-reduced in fp32 whatever the compute "
                                   "precision (PyTorch AMP keeps fp32 parameters)")
    bucket_MB: float = Field(default=25.0, gt=0, le=MAX_BUCKET_MB,
                             description="gradient bucket size, 10^6 bytes")
    first_bucket_MB: float = Field(default=1.0, gt=0, le=MAX_BUCKET_MB,
                                   description="size of the first (last layers') bucket")
    name: str = Field(default="", description="set from the section's key")

    @model_validator(mode="after")
    def _graphs(self) -> SoftwareStack:
        if self.data_loader == "cpu" and self.gpu_decode_us:
            raise ValueError("gpu_decode_us applies only to data_loader: gpu")
        return self


class SoftwareSpec(Strict):
    """``software:``: the stacks a profile knows and the one predictions use by default."""

    default: str
    stacks: dict[str, SoftwareStack] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> SoftwareSpec:
        if self.default not in self.stacks:
            raise ValueError(f"default {self.default!r} is not one of the stacks "
                             f"({', '.join(self.stacks)})")
        seen: dict[str, str] = {}
        for key, stack in self.stacks.items():
            for alias in (key, *stack.frameworks):
                if alias in seen and seen[alias] != key:
                    raise ValueError(f"{alias!r} names both {seen[alias]!r} and {key!r}")
                seen[alias] = key
        # every stack knows its own key (frozen models: rebuild with the name)
        object.__setattr__(self, "stacks", {k: v.model_copy(update={"name": k})
                                            for k, v in self.stacks.items()})
        return self
