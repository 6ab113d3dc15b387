"""The oracle against published figures, fitted and held out apart (issue 18).

The figures and their data sets are in :mod:`tests.oracle.figures`; a figure whose
data set some profile constant was fitted on (the profile's ``sources``) is *fitted*:
it is reproduced (a consistency check of the fit) but never counted as validation.
The rest are *held out*, and carry the bars: every ratio min(pred, pub)/max(pred, pub)
at least :data:`HELD_OUT_FLOOR`, their median at least :data:`HELD_OUT_MEDIAN`.
``pytest -s`` prints both tables; the README's accuracy statements are these numbers.
"""

from __future__ import annotations

import statistics

import pytest

from testbed.oracle import predict
from testbed.oracle.collectives import Fabric, bus_factor
from testbed.systems.profile import load_system
from tests.conftest import each
from tests.oracle.figures import FIGURES, accuracy_table, ratio, split

#: Issue 18's acceptance bars for held-out figures: every ratio at least 0.80, their
#: median at least 0.93. (The worst held-out rows are the single-node MLPerf v1.x rates
#: at 408 per GPU, 0.85-0.86: the ``mxnet`` stack models NHWC batch norm with fused
#: add+ReLU, not the convolution-fused batch-norm statistics NVIDIA's v1.0+ code adds.)
HELD_OUT_FLOOR = 0.80
HELD_OUT_MEDIAN = 0.93
#: A fitted figure is reproduced by construction up to what the other constants of the
#: same model add (the 8-GPU rows of a 1-GPU fit): never worse than this.
FITTED_FLOOR = 0.80


@pytest.fixture(scope="module")
def scored():
    fitted, held = split()
    return ([(f, f.predicted()) for f in fitted], [(f, f.predicted()) for f in held])


def test_fitted_and_held_out_are_apart(scored):
    fitted, held = scored
    assert fitted and held
    names = {f.data_set for f, _ in fitted}
    assert not names & {f.data_set for f, _ in held}


def test_fitted_figures_are_reproduced(scored):
    fitted, _ = scored
    print("\n" + accuracy_table("fitted (in sample)", fitted))
    for f, p in each(fitted):
        assert ratio(p, f.published) >= FITTED_FLOOR, (f.name, p, f.published)
    assert len(fitted) >= 10


def test_held_out_figures(scored):
    _, held = scored
    print("\n" + accuracy_table("held out", held))
    ratios = [ratio(p, f.published) for f, p in held]
    assert len(ratios) >= 20
    worst = min(zip(ratios, (f.name for f, _ in held), strict=True))
    assert worst[0] >= HELD_OUT_FLOOR, worst
    assert statistics.median(ratios) >= HELD_OUT_MEDIAN


def test_every_figure_belongs_to_a_named_set():
    assert all(f.data_set and f.name for f in FIGURES)
    assert len({f.name for f in FIGURES}) == len(FIGURES)


def test_multi_node_is_not_one_nic():
    """Issue 10: two DGX A100 nodes came out at ~21 GB/s with one ring per node."""
    fabric = Fabric.of(load_system("a100-cluster"))
    busbw = 2**30 / fabric.allreduce(2**30, 16).time_s * bus_factor("allreduce", 16) / 1e9
    assert busbw > 150


def test_small_batches_cost_what_they_cost():
    """One sample per GPU is far less efficient than 256: the host's launches bind on
    the eager stack, tile waves and fixed per-step work on every stack."""
    def per_gpu(system, batch, software=None):
        e = predict(system, "resnet50", "serial", 1, batch, precision="bf16",
                    software=software)
        return e.samples_per_s

    assert per_gpu("a100-cluster", 1) < 0.1 * per_gpu("a100-cluster", 256)
    assert per_gpu("h100-cluster", 16, "mxnet") < 0.8 * per_gpu("h100-cluster", 256, "mxnet")


def test_measured_time_scales_to_other_precisions():
    """ABCI's calibration measured fp32 (Chainer); fp16 follows the per-layer model's
    ratio of the two precisions on a V100 (DeepLearningExamples publishes 3.3x for
    PyTorch AMP over FP32 on the same GPU)."""
    fp32 = predict("abci-v100", "resnet50", "serial", 1, 112, precision="fp32")
    fp16 = predict("abci-v100", "resnet50", "serial", 1, 256, precision="fp16")
    speedup = (fp16.samples_per_s / fp32.samples_per_s)
    assert speedup == pytest.approx(1200 / 367, rel=0.15)
