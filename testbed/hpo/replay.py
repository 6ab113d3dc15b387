"""A recorded schedule trace turned back into a plan, so the simulator can replay it.

What the trace measured becomes the plan's cost: each trial's per-epoch times
(``trial_result.epoch_s``; a trace without them — a simulated one — gives each trial
its attempts' seconds per epoch), the mean checkpoint write (``ckpt_s``), and per
attempt the rest of its time (process start, restore, dispatch latency) as that
attempt's start-up. Its failures become injections at the epoch (or second) where
they struck, its node failures node injections, its values the objective. The
cluster, scheduler (and its promotion) and failure policy come from ``job_start``. A
lost real driver (``sweep_resumed``) becomes a failure of every node at the instant it
was lost, repaired at once: the attempts it stopped resume from their checkpoints as
they did, and the outage itself is not replayed — the replay predicts the makespan
without it (``makespan_s − outage_s`` of the measured summary). Replaying the plan
predicts the sweep's makespan from the measured per-trial times alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testbed import events as ev
from testbed.errors import ScenarioError
from testbed.hpo.cost import MeasuredCost
from testbed.hpo.objective import TableObjective
from testbed.hpo.plan import HpoPlan, NodeInjection
from testbed.hpo.timing import TrialCost
from testbed.io.schema import validate
from testbed.scenario.hpo import HpoSpec


class _Attempts:
    """Start, end and epochs of every attempt in a trace."""

    def __init__(self, events: Sequence[tuple[float, str, dict]]) -> None:
        self.starts: dict[tuple[int, int], tuple[float, dict]] = {}
        self.ends: dict[tuple[int, int], tuple[float, str, dict]] = {}
        self.epochs: dict[tuple[int, int], dict[int, tuple[float, float]]] = {}
        self.values: list[dict[str, float]] = []
        self.configs: dict[int, dict] = {}
        for t, kind, f in events:
            if kind == ev.TRIAL_START:
                key = (f["trial"], f["attempt"])
                self.starts[key] = (t, f)
                if isinstance(f.get("config"), dict):
                    self.configs[f["trial"]] = dict(f["config"])
            elif kind in (ev.TRIAL_END, ev.TRIAL_FAILED, ev.TRIAL_PREEMPTED,
                          ev.TRIAL_CANCELLED) and f.get("attempt") is not None:
                self.ends[(f["trial"], f["attempt"])] = (t, kind, f)
            if kind == ev.TRIAL_RESULT and "attempt" in f:
                per = self.epochs.setdefault((f["trial"], f["attempt"]), {})
                per[int(f["epoch"])] = (float(f.get("epoch_s", 0.0)), float(f.get("ckpt_s", 0.0)))
            if kind in (ev.TRIAL_RESULT, ev.TRIAL_END, ev.TRIAL_RUNG) \
                    and f.get("value") is not None:
                self.values.append({"trial": f["trial"], "epoch": f["epoch"], "value": f["value"]})


def _reached(start: dict, kind: str, end: dict) -> float:
    """Epochs an attempt had trained when it ended: its target, the rung a stopping
    scheduler stopped it at, or where a failure struck."""
    if kind == ev.TRIAL_END:
        return float(end.get("epoch", start["to_epoch"]))
    return float(end.get("epoch", 0.0))


#: Most trial-epochs a replay derives from attempts without per-epoch records (each is
#: one entry of the replayed cost table): ten million, seconds of work.
MAX_DERIVED_EPOCHS = 10_000_000


def _check_derived(att: _Attempts, measured: set[int], source: str) -> None:
    """Refuse, before deriving them one by one, more than :data:`MAX_DERIVED_EPOCHS`
    epoch times (a trace of huge epoch spans)."""
    total = 0
    for key, (_, f) in att.starts.items():
        if key[0] in measured or key not in att.ends:
            continue
        _, kind, fe = att.ends[key]
        top = f["to_epoch"] if kind == ev.TRIAL_END else float(fe.get("epoch") or 0.0)
        total += max(int(top) - f["from_epoch"], 0)
        if total > MAX_DERIVED_EPOCHS:
            raise ScenarioError(f"the attempts span more than {MAX_DERIVED_EPOCHS:,} epochs "
                                "without per-epoch trial_result records: too many to replay",
                                source=source, field="to_epoch")


def _epoch_times(att: _Attempts, source: str = "<trace>"
                 ) -> tuple[dict[int, dict[int, float]], float]:
    """Per trial per epoch seconds, and the mean checkpoint seconds."""
    per: dict[int, dict[int, list[float]]] = {}
    ckpts = []
    for (trial, _), epochs in att.epochs.items():
        for e, (epoch_s, ckpt_s) in epochs.items():
            per.setdefault(trial, {}).setdefault(e, []).append(epoch_s)
            if ckpt_s > 0:
                ckpts.append(ckpt_s)
    measured = set(per)
    _check_derived(att, measured, source)
    for key, (t0, f) in att.starts.items():          # no per-epoch records: derive them
        if key[0] in measured or key not in att.ends:
            continue
        t1, kind, fe = att.ends[key]
        top = _reached(f, kind, fe)
        span = top - f["from_epoch"]
        if span > 0 and kind in (ev.TRIAL_END, ev.TRIAL_FAILED, ev.TRIAL_PREEMPTED):
            seconds = (t1 - t0) / span
            for e in range(f["from_epoch"] + 1, int(top) + 1):
                per.setdefault(key[0], {}).setdefault(e, []).append(seconds)
    out = {t: {e: sum(v) / len(v) for e, v in d.items()} for t, d in per.items()}
    return out, (sum(ckpts) / len(ckpts) if ckpts else 0.0)


def _startups(att: _Attempts, cost: MeasuredCost) -> dict[tuple[int, int], float]:
    """Seconds of each attempt not spent in its measured epochs and checkpoints."""
    out = {}
    for key, (t0, f) in att.starts.items():
        if key not in att.ends:
            continue
        t1, kind, fe = att.ends[key]
        measured = att.epochs.get(key)
        if measured:
            work = sum(e + c for e, c in measured.values())
        else:
            top = _reached(f, kind, fe)
            per = TrialCost.make(cost.epoch_times(key[0], {}, 1))
            work = per.span_s(f["from_epoch"], int(top)) + (top - int(top)) * per.epoch_time(
                int(top) + 1) if top > f["from_epoch"] else 0.0
        out[key] = max(t1 - t0 - work, 0.0)
    return out


def _injections(att: _Attempts) -> list[dict[str, Any]]:
    """The trace's failures as injections. A trial's only failure strikes at its epoch
    whatever the attempt (a replayed preemption may number the attempts otherwise);
    a trial that failed more than once keeps each failure on its attempt."""
    failed = [key for key, (_, kind, _) in att.ends.items() if kind == ev.TRIAL_FAILED]
    per_trial = {trial: sum(1 for t, _ in failed if t == trial) for trial, _ in failed}
    out = []
    for key, (t1, kind, f) in sorted(att.ends.items()):
        if kind != ev.TRIAL_FAILED:
            continue
        t0, fs = att.starts[key]
        epoch = float(f.get("epoch", fs["from_epoch"]))
        if epoch > fs["from_epoch"] and per_trial[key[0]] == 1:
            out.append({"trial": key[0], "at_epoch": epoch})
        elif epoch > fs["from_epoch"]:
            out.append({"trial": key[0], "attempt": key[1], "at_epoch": epoch})
        else:
            out.append({"trial": key[0], "attempt": key[1], "at": t1 - t0})
    return out


def replay_plan(events: Sequence[tuple[float, str, dict]], *, source: str) -> HpoPlan:
    """The plan that replays ``events`` (see the module docstring)."""
    head = next((f for _, k, f in events if k == ev.JOB_START), None)
    if head is None or "slots" not in head:
        raise ScenarioError("the trace has no job_start record with 'slots'", source=source,
                            field="job_start")
    att = _Attempts(events)
    n = max(t for t, _ in att.starts) + 1
    epochs, ckpt_s = _epoch_times(att, source)
    scheduler = head.get("scheduler", "fifo")
    rungs = head.get("rungs") or [1, None, 3]
    multi = scheduler in ("asha", "hyperband")
    tops: dict[int, int] = {}
    gpus: dict[int, int] = {}
    for (trial, _), (_, f) in att.starts.items():
        tops[trial] = max(tops.get(trial, 0), f["to_epoch"])
        gpus[trial] = len(f.get("slots") or ())
    configs = []
    for i in range(n):
        cfg = {k: v for k, v in att.configs.get(i, {}).items() if k != "gpus"}
        if not multi:
            cfg["epochs"] = tops.get(i, 1)
        if gpus.get(i, 1) != min(gpus.values()):
            cfg["gpus"] = gpus[i]
        configs.append(cfg)
    spec_data = {
        "search": "random", "space": {"trial": list(range(n))}, "n_trials": n,
        "epochs": max(tops.values()), "epoch_time": 1.0, "scheduler": scheduler,
        "trial_resources": {"gpus": min(gpus.values())},
        "on_failure": head.get("on_failure", "retry"),
        "max_retries": head.get("max_retries", 2),
        "checkpoint_every_epochs": head.get("checkpoint_every_epochs"),
        "checkpoint_time": ckpt_s, "inject_failures": _injections(att),
        "metric": {"name": head.get("metric", "val_loss"), "mode": head.get("mode", "min")}}
    if multi:
        spec_data["rungs"] = {"min_epochs": rungs[0], "max_epochs": rungs[1],
                              "reduction_factor": rungs[2]}
        spec_data["promotion"] = head.get("promotion", "pause")
        del spec_data["epochs"]
    spec = validate(HpoSpec, spec_data, source=source, what="trace header")
    node_inj = tuple(NodeInjection(t, f["node"], f.get("repair_s", 0.0))
                     for t, k, f in events if k == ev.FAILURE and f.get("node", -1) >= 0)
    # a lost driver that cut attempts short (it may have cut none: they had finished)
    cut = any(k == ev.TRIAL_PREEMPTED and f.get("cause") == "driver_lost"
              for _, k, f in events)
    lost = tuple(NodeInjection(float(f.get("down_at_s", t)), -1, 0.0)
                 for t, k, f in events if k == ev.SWEEP_RESUMED and cut)
    node_inj = tuple(sorted(node_inj + lost, key=lambda n: (n.t_s, n.node)))
    objective = TableObjective(att.values, source=source, field="trial_result") \
        if att.values else None
    nodes = int(head.get("nodes") or 1)
    gpn = int(head.get("gpus_per_node") or head["slots"])
    cost = MeasuredCost(epochs)
    return HpoPlan(
        name=f"replay of {source}", source=source, spec=spec, nodes=nodes, gpus_per_node=gpn,
        cores_per_node=None, memory_per_node_bytes=None, seed=int(head.get("seed") or 0),
        configs=tuple(configs), cost=cost, objective=objective or _Zero(),
        node_injections=node_inj, startup_overrides=_startups(att, cost))


class _Zero:
    """Objective of a trace without values."""

    def value(self, index: int, config: dict, epoch: float) -> float:
        return 0.0
