"""TensorFlow / Keras 3 back end: eager GradientTape steps with op determinism.

Keras's own formats do not save the state of the dropout layers' ``SeedGenerator``s,
so a Keras-saved model restarts with fresh dropout masks. The harness checkpoint is a
``.npz`` holding, by position, every model weight (including batch-norm moving
statistics), every optimizer variable (iteration count, which drives the
learning-rate schedule, and momentum slots) and every seed-generator state.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from real_runs.backends.common import peak_rss_bytes
from real_runs.harness import RunConfig, StepResult, framework_seed

CHECKPOINT_FILE = "keras_state.npz"


def setup_determinism(seed: int):
    import os
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import keras
    import tensorflow as tf
    try:
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.threading.set_intra_op_parallelism_threads(1)
    except RuntimeError:
        pass  # already initialised in this process (a serving worker): settings stay
    tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(seed)
    keras.backend.clear_session()
    return tf, keras


def build_model(keras, name: str, width: int | None, dropout: float, seed: int, *,
                depth: int | None = None, input_shape: tuple[int, ...] | None = None):
    """Harness model ``name`` as a Keras functional model built from its layer IR."""
    from testbed.model.zoo.harness import harness_model
    return build_from_ir(keras, harness_model(name, width, depth, input_shape), dropout, seed)


def build_from_ir(keras, model_ir, dropout: float, seed: int):
    """A Keras model (NHWC) running the IR's layers in order along its edges.

    Padding is explicit (``ZeroPadding2D`` then a ``valid`` convolution), which is
    PyTorch's arithmetic; every initializer and dropout layer has its own seed.
    """
    layers = keras.layers
    counter = iter(range(seed * 97 + 1, seed * 97 + 100_000))

    def init():
        return keras.initializers.GlorotUniform(seed=next(counter))

    channels, height, width_px = model_ir.input_shape
    inp = keras.Input((height, width_px, channels))
    outputs: dict[str, object] = {}
    h = inp
    for layer in model_ir.layers:
        src = outputs[layer.inputs[0]] if layer.inputs and layer.kind != "add" else h
        kind = layer.kind
        if kind == "conv":
            if any(layer.padding):
                src = layers.ZeroPadding2D(tuple(layer.padding))(src)
            h = layers.Conv2D(layer.y[0], tuple(layer.kernel), strides=tuple(layer.stride),
                              padding="valid", use_bias=layer.extra_params > 0,
                              kernel_initializer=init())(src)
        elif kind == "bn":
            h = layers.BatchNormalization()(src)
        elif kind == "relu":
            h = layers.ReLU()(src)
        elif kind == "dropout":
            h = layers.Dropout(dropout, seed=next(counter))(src)
        elif kind == "maxpool" and not any(layer.padding):
            h = layers.MaxPooling2D(tuple(layer.kernel), strides=tuple(layer.stride))(src)
        elif kind == "avgpool" and all(d == 1 for d in layer.y[1:]):
            h = layers.GlobalAveragePooling2D(keepdims=True)(src)
        elif kind == "fc":
            h = layers.Dense(layer.y[0], use_bias=layer.extra_params > 0,
                             kernel_initializer=init())(layers.Flatten()(src))
        elif kind == "add":
            h = layers.Add()([outputs[layer.inputs[0]], outputs[layer.inputs[1]]])
        else:
            raise ValueError(f"the Keras harness cannot build IR layer {layer.name} ({kind})")
        outputs[layer.name] = h
    return keras.Model(inp, h)


def seed_generators(model) -> list:
    """The SeedGenerators of every layer, in layer order (dropout masks come from these)."""
    return [layer.seed_generator for layer in model.layers if hasattr(layer, "seed_generator")]


class KerasBackend:
    framework = "tensorflow"

    def build(self, cfg: RunConfig) -> None:
        seed = framework_seed(cfg.seed)
        tf, keras = setup_determinism(seed)
        self.tf, self.keras = tf, keras
        # process-wide Keras settings: set on every build (a serving worker runs many)
        keras.backend.set_floatx("float64" if cfg.precision == "fp64" else "float32")
        keras.mixed_precision.set_global_policy(
            "mixed_bfloat16" if cfg.precision == "bf16" else keras.backend.floatx())
        self.precision = cfg.precision
        self.model = build_model(keras, cfg.model, cfg.width, cfg.dropout, seed % 100_000,
                                 depth=cfg.depth, input_shape=cfg.input_shape)
        schedule = keras.optimizers.schedules.ExponentialDecay(
            cfg.lr, decay_steps=cfg.lr_every, decay_rate=cfg.lr_gamma, staircase=True)
        self.optimizer = keras.optimizers.SGD(learning_rate=schedule, momentum=cfg.momentum)
        self.optimizer.build(self.model.trainable_variables)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(self, x: np.ndarray, y: np.ndarray) -> StepResult:
        tf = self.tf
        xb = tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
        if self.precision == "fp64":
            xb = tf.cast(xb, tf.float64)
        yb = tf.constant(y)
        t0 = time.perf_counter()
        with tf.GradientTape() as tape:
            loss = self.loss_fn(yb, self.model(xb, training=True))
        t1 = time.perf_counter()
        grads = tape.gradient(loss, self.model.trainable_variables)
        t2 = time.perf_counter()
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
        t3 = time.perf_counter()
        return StepResult(float(loss.numpy()), t1 - t0, t2 - t1, t3 - t2)

    def save(self, directory: Path) -> None:
        arrays = {}
        for i, v in enumerate(self.model.weights):
            arrays[f"model/{i:04d}"] = np.asarray(v.numpy())
        for i, v in enumerate(self.optimizer.variables):
            arrays[f"optimizer/{i:04d}"] = np.asarray(v.numpy())
        for i, gen in enumerate(seed_generators(self.model)):
            arrays[f"seed_generator/{i:04d}"] = np.asarray(gen.state.numpy())
        with open(directory / CHECKPOINT_FILE, "wb") as stream:
            np.savez(stream, **arrays)

    def load(self, directory: Path, omit: frozenset[str]) -> None:
        with np.load(directory / CHECKPOINT_FILE, allow_pickle=False) as data:
            groups = [("model", self.model.weights)]
            if "optimizer" not in omit:
                groups.append(("optimizer", self.optimizer.variables))
            if "rng" not in omit:
                groups.append(("seed_generator", [g.state for g in seed_generators(self.model)]))
            for prefix, variables in groups:
                keys = sorted(k for k in data.files if k.startswith(prefix + "/"))
                if len(keys) != len(variables):
                    raise ValueError(f"checkpoint has {len(keys)} {prefix} arrays, "
                                     f"model has {len(variables)}")
                for key, var in zip(keys, variables, strict=True):
                    var.assign(data[key])

    def parameters(self) -> list[tuple[str, np.ndarray]]:
        return [(f"{i:04d}", np.asarray(v.numpy())) for i, v in enumerate(self.model.weights)]

    def parameter_count(self) -> int:
        return int(sum(int(np.prod(v.shape)) for v in self.model.trainable_variables))

    def layer_times(self) -> dict[str, float]:
        return {}

    def peak_memory_bytes(self) -> int:
        return peak_rss_bytes()


def make() -> KerasBackend:
    return KerasBackend()
