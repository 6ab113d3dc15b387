"""The checkpoint study's measurements on real frameworks (``testbed study checkpoint``).

* :mod:`~real_runs.ckpt_study.subjects` — the model and optimizer state whose checkpoint
  is measured: ResNet-50 (25.6 M parameters) and the harness models, in PyTorch,
  TensorFlow/Keras and Chainer, after one real training step;
* :mod:`~real_runs.ckpt_study.bench` — every format's save, durable commit and load
  against ``dd`` of the same bytes (a child process per framework);
* :mod:`~real_runs.ckpt_study.writers` — 1…N writer processes saving at once;
* :mod:`~real_runs.ckpt_study.restart` — straight-through vs checkpoint-at-k and
  restore in a new process, bit for bit.

Frameworks are imported inside functions only.
"""
