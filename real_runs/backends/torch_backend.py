"""PyTorch back end: deterministic models, SGD with momentum and StepLR, hooks for layer times.

The checkpoint is one ``torch.save`` of plain state dicts (model, optimizer, scheduler,
CPU and CUDA RNG states as tensors), loaded with ``weights_only=True`` so that a
checkpoint file can never run code.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from real_runs.backends.common import peak_rss_bytes
from real_runs.harness import RunConfig, StepResult, framework_seed

CHECKPOINT_FILE = "torch_state.pt"


def setup_determinism(seed: int) -> None:
    """Seed torch and make every eager op deterministic.

    ``torch.use_deterministic_algorithms(True)`` sets the eager flag and, for
    ``torch.compile``, ``torch._inductor.config.deterministic`` — importing the inductor
    costs about 4.5 s per process on a laptop CPU. The harness runs eagerly, so unless
    the inductor is already loaded it sets just the eager flag, which is what the public
    function does for eager ops.
    """
    import sys

    import torch
    torch.manual_seed(seed)
    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(True)
    else:
        torch._C._set_deterministic_algorithms(True, warn_only=False)
    torch.set_num_threads(1)
    if hasattr(torch.backends, "cudnn"):
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def build_model(name: str, width: int | None = None, dropout: float = 0.25, *,
                depth: int | None = None, input_shape: tuple[int, ...] | None = None):
    """Harness model ``name`` as a ``torch.nn.Module`` built from its layer IR."""
    from testbed.model.zoo.harness import harness_model
    return build_from_ir(harness_model(name, width, depth, input_shape), dropout)


def _module(layer, dropout: float):
    """The ``torch.nn`` module of one IR layer (None for additions)."""
    from torch import nn

    kind = layer.kind
    if kind == "conv":
        return nn.Conv2d(layer.x[0], layer.y[0], tuple(layer.kernel), stride=tuple(layer.stride),
                         padding=tuple(layer.padding), groups=layer.groups,
                         bias=layer.extra_params > 0)
    if kind == "bn":
        return nn.BatchNorm2d(layer.x[0])
    if kind == "relu":
        return nn.ReLU()
    if kind == "dropout":
        return nn.Dropout(dropout)
    if kind == "maxpool":
        return nn.MaxPool2d(tuple(layer.kernel), stride=tuple(layer.stride),
                            padding=tuple(layer.padding))
    if kind == "avgpool":
        if all(d == 1 for d in layer.y[1:]):
            return nn.AdaptiveAvgPool2d(1)
        return nn.AvgPool2d(tuple(layer.kernel), stride=tuple(layer.stride),
                            padding=tuple(layer.padding))
    if kind == "fc":
        return nn.Linear(int(np.prod(layer.x)), layer.y[0], bias=layer.extra_params > 0)
    if kind == "add":
        return None
    raise ValueError(f"the PyTorch harness cannot build IR layer kind {kind!r}")


def build_from_ir(model_ir, dropout: float):
    """A ``torch.nn.Module`` that runs the IR's layers in order, following its edges
    (``inputs``: skip connections and residual additions); modules are created in
    layer order, so initial weights depend only on the seed."""
    from torch import nn

    class IRNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ir_name = model_ir.name
            self.layers = nn.ModuleDict()
            self.plan: list[tuple[str, str, str, tuple[str, ...]]] = []
            for layer in model_ir.layers:
                key = layer.name.replace(".", "_")
                module = _module(layer, dropout)
                if module is not None:
                    self.layers[key] = module
                self.plan.append((layer.name, key, layer.kind, layer.inputs))

        def forward(self, x):
            outputs = {}
            h = x
            for name, key, kind, inputs in self.plan:
                if kind == "add":
                    h = outputs[inputs[0]] + outputs[inputs[1]]
                else:
                    src = outputs[inputs[0]] if inputs else h
                    h = self.layers[key](src.flatten(1) if kind == "fc" else src)
                outputs[name] = h
            return h

    return IRNet()


class TorchBackend:
    framework = "torch"

    def build(self, cfg: RunConfig) -> None:
        import torch
        setup_determinism(framework_seed(cfg.seed))
        self.torch = torch
        self.precision = cfg.precision
        self.model = build_model(cfg.model, cfg.width, cfg.dropout, depth=cfg.depth,
                                 input_shape=cfg.input_shape)
        if cfg.precision == "fp64":
            self.model = self.model.double()
        self.device = torch.device("cuda" if cfg.device == "cuda" else "cpu")
        if cfg.device == "cuda":
            if not torch.cuda.is_available():
                from testbed.errors import InputError
                raise InputError("no CUDA GPU is visible to PyTorch", field="device")
            self.model = self.model.to(self.device)
        self.model.train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=cfg.lr_every,
                                                         gamma=cfg.lr_gamma)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self._layer_s: dict[str, float] = {}
        self._starts: dict[str, float] = {}
        self._hooked = False

    def enable_layer_timing(self) -> None:
        """Time every layer's forward pass with hooks from now on. Hooks cost a few
        microseconds per layer and step, so step times are measured without them."""
        if self._hooked:
            return
        self._hooked = True
        names = {key: name for name, key, _, _ in self.model.plan}
        for key, module in self.model.layers.items():
            label = f"{names[key]}:{type(module).__name__}"
            module.register_forward_pre_hook(self._pre_hook(label))
            module.register_forward_hook(self._post_hook(label))

    def _pre_hook(self, name: str):
        def hook(module, args):
            self._starts[name] = time.perf_counter()
        return hook

    def _post_hook(self, name: str):
        def hook(module, args, output):
            elapsed = time.perf_counter() - self._starts.pop(name, time.perf_counter())
            self._layer_s[name] = self._layer_s.get(name, 0.0) + elapsed
        return hook

    def _forward_loss(self, xb, yb):
        if self.precision == "bf16":
            # mixed precision as PyTorch AMP does it: bf16 compute, fp32 weights
            with self.torch.autocast(self.device.type, dtype=self.torch.bfloat16):
                return self.loss_fn(self.model(xb), yb)
        return self.loss_fn(self.model(xb), yb)

    def step(self, x: np.ndarray, y: np.ndarray) -> StepResult:
        torch = self.torch
        xb, yb = torch.from_numpy(x).to(self.device), torch.from_numpy(y).to(self.device)
        if self.precision == "fp64":
            xb = xb.double()
        sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        t0 = time.perf_counter()
        loss = self._forward_loss(xb, yb)
        sync()
        t1 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        sync()
        t2 = time.perf_counter()
        self.optimizer.step()
        self.scheduler.step()
        sync()
        t3 = time.perf_counter()
        return StepResult(float(loss.detach()), t1 - t0, t2 - t1, t3 - t2)

    def rng_state(self) -> dict:
        torch = self.torch
        state = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def save(self, directory: Path) -> None:
        payload = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                   "scheduler": self.scheduler.state_dict(), "rng": self.rng_state()}
        with open(directory / CHECKPOINT_FILE, "wb") as stream:
            self.torch.save(payload, stream)

    def load(self, directory: Path, omit: frozenset[str]) -> None:
        torch = self.torch
        # RNG states must be CPU tensors; load_state_dict copies onto the model's device
        payload = torch.load(directory / CHECKPOINT_FILE, weights_only=True, map_location="cpu")
        self.model.load_state_dict(payload["model"])
        if "optimizer" not in omit:
            self.optimizer.load_state_dict(payload["optimizer"])
            self.scheduler.load_state_dict(payload["scheduler"])
        if "rng" not in omit:
            torch.set_rng_state(payload["rng"]["cpu"])
            if "cuda" in payload["rng"] and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(payload["rng"]["cuda"])

    def parameters(self) -> list[tuple[str, np.ndarray]]:
        return [(name, t.detach().cpu().numpy()) for name, t in self.model.state_dict().items()
                if t.is_floating_point()]

    def parameter_count(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters()))

    def layer_times(self) -> dict[str, float]:
        return dict(self._layer_s)

    def peak_memory_bytes(self) -> int:
        torch = self.torch
        if torch.cuda.is_available():
            return int(torch.cuda.max_memory_allocated())
        return peak_rss_bytes()


def make() -> TorchBackend:
    return TorchBackend()
