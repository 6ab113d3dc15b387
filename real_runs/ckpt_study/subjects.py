"""What the checkpoint study saves: a real model and its optimizer state, in one framework.

``resnet50`` is the zoo's ResNet-50 (``testbed.model.zoo.resnet50``: 25,557,032
parameters, 161 weight tensors, 53 batch-norm layers), built from its layer IR by the
harness's own builders (:func:`real_runs.backends.torch_backend.build_from_ir` and its
Keras and Chainer twins) with SGD + momentum, so its state is weights, batch-norm
statistics and one momentum slot per weight. It is built for 64×64 inputs: the
parameters do not depend on the image size (global average pooling before the
classifier), and one real training step on two such images — which fills the momentum
slots with real values, so compressed formats see realistic data — takes about a
second on one CPU core instead of twelve at 224×224. The Keras builder takes only
unpadded max-pooling, so the Keras copy's stem pool is unpadded: its weights and
optimizer state are the same tensors, shape for shape.

The harness models (``mlp``, ``cnn``, ``resnet``, ``resnet18``) come from
:class:`real_runs.harness.Trainer`, one training step, so their checkpoints include the
harness's own format (back-end files, ``state.json`` and the atomic store's manifest).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from real_runs.harness import MODELS, RunConfig, Trainer, make_backend
from testbed.errors import UnknownNameError
from testbed.units import did_you_mean

#: Models of real size the study builds beside the harness models.
LARGE_MODELS = ("resnet50",)
STUDY_MODELS = (*LARGE_MODELS, *MODELS)
#: Input images of the one training step that fills the optimizer state of ResNet-50.
STEP_SHAPE = (2, 3, 64, 64)
CLASSES = 1000
LEARNING_RATE, MOMENTUM = 0.01, 0.9


@dataclass
class Subject:
    """A model and its optimizer in one framework (what a format's save/load gets)."""

    framework: str
    name: str
    model: Any
    optimizer: Any
    parameters: int
    tensors: int               # weight tensors (the optimizer keeps one slot per tensor)
    loss_fn: Any = None        # Keras formats compile the model with it
    trainer: Trainer | None = None   # harness models: the harness format needs it


def check_study_model(name: str) -> str:
    if name not in STUDY_MODELS:
        raise UnknownNameError(f"unknown model {name!r}{did_you_mean(name, STUDY_MODELS)}; "
                               f"known: {', '.join(STUDY_MODELS)}", field="--models")
    return name


def build_subject(framework: str, name: str, seed: int = 0) -> Subject:
    """The model ``name`` in ``framework`` after one training step (module doc)."""
    check_study_model(name)
    if name in LARGE_MODELS:
        builder = {"torch": _torch_resnet50, "tensorflow": _keras_resnet50,
                   "chainer": _chainer_resnet50}[framework]
        return builder(seed)
    cfg = RunConfig(framework=framework, model=name, seed=seed, steps=1).validated()
    trainer = Trainer(cfg, make_backend(cfg.framework))
    trainer.train_until(1)
    b: Any = trainer.backend
    return Subject(framework=cfg.framework, name=name, model=b.model, optimizer=b.optimizer,
                   parameters=b.parameter_count(), tensors=_ir_tensors(cfg.ir()),
                   loss_fn=getattr(b, "loss_fn", None), trainer=trainer)


def _ir_tensors(model_ir) -> int:
    """Trainable tensors of a layer IR: a weight and its bias, a batch norm's γ and β."""
    count = 0
    for layer in model_ir.layers:
        if layer.kind in ("conv", "fc"):
            count += 1 + (layer.extra_params > 0)
        elif layer.kind == "bn":
            count += 2
    return count


def model_ir(name: str):
    """The layer IR of a study model (ResNet-50 for 64×64 inputs; a harness model's
    default configuration)."""
    check_study_model(name)
    if name == "resnet50":
        return _resnet50_ir()
    from testbed.model.zoo.harness import harness_model
    return harness_model(name)


def _resnet50_ir():
    from testbed.model.zoo import resnet50
    return resnet50(STEP_SHAPE[1:], classes=CLASSES)


def _batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    from testbed.streams import generator
    rng = generator(seed, "run.ckpt_payload")
    x = rng.standard_normal(STEP_SHAPE, dtype=np.float32)
    y = rng.integers(0, CLASSES, STEP_SHAPE[0]).astype(np.int64)
    return x, y


def _torch_resnet50(seed: int) -> Subject:
    import torch

    from real_runs.backends.torch_backend import build_from_ir, setup_determinism
    setup_determinism(seed)
    ir = _resnet50_ir()
    model = build_from_ir(ir, dropout=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    x, y = _batch(seed)
    loss = torch.nn.CrossEntropyLoss()(model(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward()
    optimizer.step()
    return Subject("torch", "resnet50", model, optimizer, ir.parameters, _ir_tensors(ir))


def _keras_resnet50(seed: int) -> Subject:
    from real_runs.backends.tf_backend import build_from_ir, setup_determinism
    tf, keras = setup_determinism(seed)
    keras.backend.set_floatx("float32")
    keras.mixed_precision.set_global_policy("float32")
    ir = _resnet50_ir()
    unpadded = replace(ir, layers=tuple(replace(layer, padding=(0, 0))
                                        if layer.kind == "maxpool" else layer
                                        for layer in ir.layers))
    model = build_from_ir(keras, unpadded, 0.0, seed % 100_000)
    optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = _batch(seed)
    with tf.GradientTape() as tape:
        loss = loss_fn(tf.constant(y), model(tf.constant(x.transpose(0, 2, 3, 1)),
                                             training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    parameters = int(sum(int(np.prod(v.shape)) for v in model.trainable_variables))
    return Subject("tensorflow", "resnet50", model, optimizer, parameters, _ir_tensors(ir),
                   loss_fn=loss_fn)


def _chainer_resnet50(seed: int) -> Subject:
    from real_runs.backends.chainer_backend import build_from_ir, import_chainer
    from real_runs.harness import seed_process_globals
    chainer = import_chainer()
    seed_process_globals(seed)   # Chainer initialises weights from NumPy's global generator
    ir = _resnet50_ir()
    model = build_from_ir(ir, dropout=0.0)
    optimizer = chainer.optimizers.MomentumSGD(lr=LEARNING_RATE, momentum=MOMENTUM)
    optimizer.setup(model)
    x, y = _batch(seed)
    loss = chainer.functions.softmax_cross_entropy(model(x), y.astype(np.int32))
    model.cleargrads()
    loss.backward()
    optimizer.update()
    parameters = int(sum(p.size for p in model.params()))
    return Subject("chainer", "resnet50", model, optimizer, parameters, _ir_tensors(ir))
