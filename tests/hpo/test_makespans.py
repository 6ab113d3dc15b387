"""The issue's acceptance makespans and list-scheduling properties of fifo/longest_first.

The 27-trial grid (20/50/100 epochs, 1 s per epoch) sums to 9 × 170 = 1530 s of work.
FIFO assigns trials in submission order to the first free GPU (PyCOMPSs); longest
first is LPT list scheduling (Graham 1969). Expected makespans are the issue's.
"""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.hpo.space import grid
from tests.hpo.helpers import ISSUE_SPACE, grid_of, sim, starts

FIFO = {1: 1530, 2: 800, 4: 440, 8: 250, 16: 150, 27: 100}
LONGEST = {1: 1530, 2: 770, 4: 390, 8: 200, 16: 100, 27: 100}


def _issue(scheduler: str) -> dict:
    return {"search": "grid", "space": ISSUE_SPACE, "epoch_time": "1s",
            "scheduler": scheduler, "trial_resources": {"gpus": 1}}


@pytest.mark.parametrize("gpus", sorted(FIFO))
def test_fifo_grid_makespans_exact(gpus):
    s = sim(_issue("fifo"), gpus=gpus).summary
    assert s.makespan_s == FIFO[gpus]
    assert s.trials_completed == 27 and s.retries == 0 and s.lost_to_failures_s == 0
    assert s.busy_slot_s == 1530
    assert s.utilisation == pytest.approx(1530 / (gpus * FIFO[gpus]))


@pytest.mark.parametrize("gpus", sorted(LONGEST))
def test_longest_first_grid_makespans_exact(gpus):
    assert sim(_issue("longest_first"), gpus=gpus).summary.makespan_s == LONGEST[gpus]


def test_grid_is_row_major_in_the_order_written():
    points = grid(ISSUE_SPACE)
    assert len(points) == 27
    assert [p["epochs"] for p in points[:4]] == [20, 50, 100, 20]
    assert points[3] == {"optimizer": "adam", "batch_size": 64, "epochs": 20}
    assert points[26] == {"optimizer": "rmsprop", "batch_size": 128, "epochs": 100}


def test_fifo_starts_in_submission_order_on_the_first_free_gpu():
    run = sim(_issue("fifo"), gpus=4)
    first = starts(run)[:4]
    assert [f["trial"] for f in first] == [0, 1, 2, 3]
    assert [f["slots"] for f in first] == [[0], [1], [2], [3]]


def test_nodes_split_gpus_the_same_way():
    # 2 nodes × 2 GPUs = 4 GPUs: single-GPU trials do not care about node boundaries
    assert sim(_issue("fifo"), nodes=2, gpus=2).summary.makespan_s == FIFO[4]


def _list_schedule(durations, m, order):
    free = [0.0] * m
    heapq.heapify(free)
    end = 0.0
    for i in order:
        t = heapq.heappop(free) + durations[i]
        end = max(end, t)
        heapq.heappush(free, t)
    return end


@given(st.lists(st.integers(1, 30), min_size=1, max_size=25), st.integers(1, 6))
def test_fifo_and_lpt_equal_a_naive_list_schedule(epochs, m):
    """Independent reference: a min-heap of GPU free times, trials in queue order."""
    n = len(epochs)
    fifo = sim(grid_of(epochs), gpus=m).summary
    lpt = sim(grid_of(epochs, scheduler="longest_first"), gpus=m).summary
    assert fifo.makespan_s == _list_schedule(epochs, m, range(n))
    order = sorted(range(n), key=lambda i: (-epochs[i], i))
    assert lpt.makespan_s == _list_schedule(epochs, m, order)
    # Graham's bound for any list schedule, and the trivial lower bounds
    total, longest = sum(epochs), max(epochs)
    for s in (fifo, lpt):
        assert max(total / m, longest) - 1e-9 <= s.makespan_s
        assert s.makespan_s <= total / m + longest * (1 - 1 / m) + 1e-9
        assert s.busy_slot_s == total and 0 < s.utilisation <= 1


def test_multi_gpu_trials_share_a_node_and_backfill():
    # gpus in the space: 2-GPU trials and 1-GPU trials on one node of 3 GPUs.
    hpo = {"search": "grid", "space": {"gpus": [2, 1], "epochs": [10]}, "epoch_time": "1s"}
    run = sim(hpo, gpus=3)
    st_ = starts(run)
    assert st_[0]["slots"] == [0, 1] and st_[1]["slots"] == [2]
    assert run.summary.makespan_s == 10
    assert run.summary.busy_slot_s == 30


def test_cores_and_memory_limit_concurrency():
    # 4 GPUs but cores for only 2 trials at once: 4 trials of 10 s take 20 s
    hpo = grid_of([10, 10, 10, 10], trial_resources={"gpus": 1, "cores": 8},
                  node_resources={"cores": 16})
    assert sim(hpo, gpus=4).summary.makespan_s == 20
    hpo = grid_of([10, 10, 10], trial_resources={"gpus": 1, "memory": "100GiB"},
                  node_resources={"memory": "250GiB"})
    assert sim(hpo, gpus=4).summary.makespan_s == 20
