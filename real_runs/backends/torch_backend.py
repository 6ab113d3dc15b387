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
from real_runs.harness import CLASSES, IMAGE_SHAPE, RunConfig, StepResult, framework_seed

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


def build_model(name: str, width: int, dropout: float):
    """The three harness models: MLP, small CNN, ResNet-style CNN (CPU-sized)."""
    import torch
    from torch import nn

    channels, height, width_px = IMAGE_SHAPE
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(channels * height * width_px, width), nn.ReLU(),
                             nn.Dropout(dropout), nn.Linear(width, width), nn.ReLU(),
                             nn.Linear(width, CLASSES))
    if name == "cnn":
        half = max(width // 2, 1)
        return nn.Sequential(nn.Conv2d(channels, half, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(half, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Dropout(dropout),
                             nn.Linear(width * (height // 4) * (width_px // 4), CLASSES))

    class Block(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + x)

    c = max(width // 2, 2)
    return nn.Sequential(nn.Conv2d(channels, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                         nn.ReLU(), Block(c), Block(c), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(dropout), nn.Linear(c, CLASSES))


class TorchBackend:
    framework = "torch"

    def build(self, cfg: RunConfig) -> None:
        import torch
        setup_determinism(framework_seed(cfg.seed))
        self.torch = torch
        self.model = build_model(cfg.model, cfg.width, cfg.dropout)
        self.model.train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=cfg.lr_every,
                                                         gamma=cfg.lr_gamma)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self._layer_s: dict[str, float] = {}
        self._starts: dict[str, float] = {}
        for name, module in self.model.named_modules():
            if name and not list(module.children()):
                label = f"{name}:{type(module).__name__}"
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

    def step(self, x: np.ndarray, y: np.ndarray) -> StepResult:
        torch = self.torch
        xb, yb = torch.from_numpy(x), torch.from_numpy(y)
        t0 = time.perf_counter()
        loss = self.loss_fn(self.model(xb), yb)
        t1 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        self.optimizer.step()
        self.scheduler.step()
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
