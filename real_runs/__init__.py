"""Real-run harnesses: PyTorch, TensorFlow/Keras and Chainer training with complete atomic
checkpoints, a fault-injecting supervisor, format and collective benchmarks.

Importing this package (or any module in it) never imports a DL framework; frameworks
are imported inside the functions that need them, mostly in child processes.
"""
