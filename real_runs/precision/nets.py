"""The precision study's network, trained the same way on PyTorch, TensorFlow/Keras and
Chainer.

One MLP (inputs → ReLU hidden layers → logits or one regression output), computing in
float32. Everything random is drawn here from NumPy generators on named
``SeedSequence`` streams — the initial weights (He-uniform hidden layers,
Glorot-uniform output layer, zero biases) and the order of the mini-batches — and
handed to the framework, so the three frameworks start from the same weights, see the
same batches and differ only in their float arithmetic. Adam (Kingma & Ba 2015) with
the same ε in every framework; no dropout, so training draws nothing from a
framework's generator (each is still seeded, single-threaded and deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from testbed.streams import seed_sequence

FRAMEWORKS = ("torch", "tensorflow", "chainer")
#: Adam's ε, the same in every framework (PyTorch's default; Keras's is 1e-7).
ADAM_EPSILON = 1e-8

Framework = Literal["torch", "tensorflow", "chainer"]


@dataclass(frozen=True)
class NetSpec:
    """The network and its training: layer widths, epochs, batch size, learning rate."""

    inputs: int
    hidden: tuple[int, ...]
    outputs: int
    task: Literal["classification", "regression"]
    epochs: int
    batch_size: int
    learning_rate: float

    @property
    def widths(self) -> tuple[int, ...]:
        return (self.inputs, *self.hidden, self.outputs)


def stream(seed: int, purpose: str) -> np.random.SeedSequence:
    """The seed sequence of one purpose under run seed ``seed``."""
    return seed_sequence(seed, f"precision.{purpose}")


def initial_weights(spec: NetSpec, seed: int) -> list[np.ndarray]:
    """``[W1, b1, W2, b2, …]`` in float32, each W shaped (fan_in, fan_out)."""
    rng = np.random.Generator(np.random.PCG64(stream(seed, "weights")))
    out: list[np.ndarray] = []
    pairs = list(zip(spec.widths[:-1], spec.widths[1:], strict=True))
    for i, (fan_in, fan_out) in enumerate(pairs):
        last = i == len(pairs) - 1
        # He et al. 2015 for ReLU layers, Glorot & Bengio 2010 for the linear output.
        limit = np.sqrt(6.0 / (fan_in + fan_out)) if last else np.sqrt(6.0 / fan_in)
        out.append(rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32))
        out.append(np.zeros(fan_out, dtype=np.float32))
    return out


def batch_order(n: int, spec: NetSpec, seed: int) -> list[np.ndarray]:
    """The index arrays of every mini-batch of every epoch (a fresh shuffle per epoch)."""
    rng = np.random.Generator(np.random.PCG64(stream(seed, "batches")))
    batches = []
    for _ in range(spec.epochs):
        order = rng.permutation(n)
        batches += [order[i:i + spec.batch_size] for i in range(0, n, spec.batch_size)]
    return batches


#: One point of a learning curve: the epoch's mean training loss and the outputs on
#: the test inputs at the epoch's end.
CurvePoint = tuple[float, np.ndarray]


def train_predict(framework: Framework, spec: NetSpec, weights: list[np.ndarray],
                  x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                  batches: list[np.ndarray], seed: int,
                  curve: list[CurvePoint] | None = None) -> np.ndarray:
    """Train on float32 ``x_train`` and return the float32 outputs on ``x_test``
    (logits, or the standardised regression value); ``y_train`` holds int64 classes or
    float32 standardised values. With ``curve`` (a list), every epoch's
    :data:`CurvePoint` is appended to it (evaluating does not change the training)."""
    backend = {"torch": _torch, "tensorflow": _tensorflow, "chainer": _chainer}[framework]
    per_epoch = -(-len(x_train) // spec.batch_size)
    return backend(spec, weights, x_train, y_train, x_test, batches, seed,
                   _Curve(curve, per_epoch))


class _Curve:
    """Collects a learning curve: the losses of an epoch, then its end-of-epoch outputs."""

    def __init__(self, points: list[CurvePoint] | None, per_epoch: int) -> None:
        self.points = points
        self.per_epoch = per_epoch
        self.losses: list[float] = []

    def step(self, loss_value, outputs) -> None:
        """After one step: ``loss_value()`` and, at an epoch's end, ``outputs()``."""
        if self.points is None:
            return
        self.losses.append(float(loss_value()))
        if len(self.losses) == self.per_epoch:
            self.points.append((float(np.mean(self.losses)), np.asarray(outputs())))
            self.losses = []


def _torch(spec: NetSpec, weights: list[np.ndarray], x_train: np.ndarray, y_train: np.ndarray,
           x_test: np.ndarray, batches: list[np.ndarray], seed: int, curve: _Curve
           ) -> np.ndarray:
    import torch
    from torch import nn

    from real_runs.backends.torch_backend import setup_determinism
    setup_determinism(seed)   # seeded, deterministic ops, one thread
    layers: list[nn.Module] = []
    for w, b in zip(weights[::2], weights[1::2], strict=True):
        linear = nn.Linear(*w.shape)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
            linear.bias.copy_(torch.from_numpy(b))
        layers += [linear, nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    optimizer = torch.optim.Adam(model.parameters(), lr=spec.learning_rate, eps=ADAM_EPSILON)
    loss_fn = nn.CrossEntropyLoss() if spec.task == "classification" else nn.MSELoss()
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    test = torch.from_numpy(x_test)

    def outputs():
        with torch.no_grad():
            return model(test).numpy()

    for idx in batches:
        index = torch.from_numpy(idx)
        optimizer.zero_grad()
        loss = loss_fn(model(x[index]), y[index])
        loss.backward()
        optimizer.step()
        curve.step(loss.item, outputs)
    return outputs()


def _tensorflow(spec, weights, x_train, y_train, x_test, batches, seed, curve: _Curve):
    from real_runs.backends.tf_backend import setup_determinism
    tf, keras = setup_determinism(seed)   # one thread, op determinism, seeded, fresh session
    layers = [keras.Input((spec.inputs,))]
    layers += [keras.layers.Dense(h, activation="relu") for h in spec.hidden]
    model = keras.Sequential([*layers, keras.layers.Dense(spec.outputs)])
    model.set_weights(weights)
    optimizer = keras.optimizers.Adam(learning_rate=spec.learning_rate, epsilon=ADAM_EPSILON)
    loss_fn = (keras.losses.SparseCategoricalCrossentropy(from_logits=True)
               if spec.task == "classification" else keras.losses.MeanSquaredError())
    y_dtype = tf.int64 if spec.task == "classification" else tf.float32
    y_shape = (None,) if spec.task == "classification" else (None, 1)

    @tf.function(input_signature=[tf.TensorSpec((None, spec.inputs), tf.float32),
                                  tf.TensorSpec(y_shape, y_dtype)])
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    def outputs():
        return np.asarray(model(x_test, training=False))

    for idx in batches:
        loss = step(x_train[idx], y_train[idx])
        curve.step(loss.numpy, outputs)
    return outputs()


def _stdlib_distutils() -> None:
    """Chainer imports ``numpy.distutils``, which needs Python 3.11's own ``distutils``;
    unless ``SETUPTOOLS_USE_DISTUTILS=stdlib`` was set at start-up, setuptools' ``.pth``
    shim hands out its copy instead, which lacks ``msvccompiler``. Removing the shim
    before anything imported distutils restores the standard library's."""
    import sys
    if "distutils" in sys.modules:
        return
    try:
        import _distutils_hack
    except ImportError:
        return
    _distutils_hack.remove_shim()


def _chainer(spec, weights, x_train, y_train, x_test, batches, seed, curve: _Curve):
    _stdlib_distutils()
    from real_runs.backends.chainer_backend import import_chainer
    chainer = import_chainer()   # cuDNN off, deterministic
    F, L = chainer.functions, chainer.links
    pairs = list(zip(weights[::2], weights[1::2], strict=True))

    class MLP(chainer.ChainList):  # type: ignore[name-defined]  # the lazily imported framework's
        def __init__(self):
            super().__init__(*[L.Linear(w.shape[0], w.shape[1], initialW=w.T.copy(),
                                        initial_bias=b.copy()) for w, b in pairs])

        def forward(self, x):
            for link in list(self)[:-1]:
                x = F.relu(link(x))
            return self[-1](x)

    model = MLP()
    optimizer = chainer.optimizers.Adam(alpha=spec.learning_rate, eps=ADAM_EPSILON)
    optimizer.setup(model)
    classify = spec.task == "classification"
    labels = y_train.astype(np.int32) if classify else y_train

    def outputs():
        with chainer.using_config("train", False), chainer.no_backprop_mode():
            return np.asarray(model(x_test).array)

    for idx in batches:
        model.cleargrads()
        out = model(x_train[idx])
        loss = (F.softmax_cross_entropy(out, labels[idx]) if classify
                else F.mean_squared_error(out, labels[idx]))
        loss.backward()
        optimizer.update()
        curve.step(lambda loss=loss: loss.array, outputs)
    return outputs()
