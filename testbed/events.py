"""The event vocabulary shared by the simulator's event log and the real-run timeline.

Both ``simulators`` (simulated time) and ``real_runs`` (wall-clock time of a supervised
run) write the same records, one JSON object per line, so the two can be compared
directly. Serialisation is canonical (sorted keys, fixed float formatting, no
whitespace), so the same run gives the same bytes.

Record fields: ``t_s`` (seconds since the run started), ``event`` (one of
:data:`EVENT_KINDS`) and event-specific fields, e.g. ``step`` / ``start_step`` /
``end_step``, ``cause``, ``node``, ``level``, ``bytes``, ``duration_s``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from testbed.io.canonical import dumps

JOB_START = "job_start"            # the job (or a restarted incarnation) begins
STEPS = "steps"                    # a contiguous range of training steps ran: start_step, end_step
CHECKPOINT_BEGIN = "checkpoint_begin"
CHECKPOINT_COMMIT = "checkpoint_commit"    # the checkpoint is durable: step, level
CHECKPOINT_ABORT = "checkpoint_abort"      # a failure struck while writing
FAILURE = "failure"                # a fault (simulated failure or a real SIGKILL): cause, node
RESTART_BEGIN = "restart_begin"    # detection + requeue/replacement starts
WAIT = "wait"                      # waiting for repaired or spare nodes
LOAD = "load"                      # checkpoint load during restart: step
RESTART_END = "restart_end"        # training resumes
CORRUPTION_DETECTED = "corruption_detected"  # a damaged checkpoint was found and skipped
MAINTENANCE = "maintenance"
JOB_END = "job_end"

# HPO schedules (simulators/hpo/engine.py, testbed/app/hpo/driver.py): trial, attempt, slots, epoch
TRIAL_START = "trial_start"          # an attempt starts: node, slots, from_epoch, to_epoch
TRIAL_RESULT = "trial_result"        # a trial reported a value after an epoch (real runs)
TRIAL_END = "trial_end"              # an attempt reached its target epoch: value, status
TRIAL_FAILED = "trial_failed"        # the attempt died: epoch, resume_epoch, lost_s, cause
TRIAL_PREEMPTED = "trial_preempted"  # its node went down: resumes, uses no retry
TRIAL_CANCELLED = "trial_cancelled"  # by the failure policy (never ran, or killed)
NODE_UP = "node_up"                  # a failed node is back
TRIAL_RUNG = "trial_rung"            # a stopping scheduler let a trial go on at a rung: value
HPO_EVENT_KINDS = (TRIAL_START, TRIAL_RESULT, TRIAL_END, TRIAL_FAILED, TRIAL_PREEMPTED,
                   TRIAL_CANCELLED, NODE_UP, TRIAL_RUNG)
# the real HPO driver's own life: it was lost (killed) and a rerun resumed the sweep
SWEEP_RESUMED = "sweep_resumed"      # down_at_s (last sign of life), outage_s
HPO_SWEEP_KINDS = (SWEEP_RESUMED,)

# cluster operations (testbed/resilience/ops.py): node, nodes, stage, outcome
DIAGNOSIS = "diagnosis"              # a hardware failure missed or blamed on another node
REPAIR_BEGIN = "repair_begin"        # a node enters a repair stage: node, stage
REPAIR_END = "repair_end"            # a stage is over: node, stage, fixed / escalated
RETIRED = "node_retired"             # the retirement policy took a node out: node, failures
IDLE_FAILURE = "idle_failure"        # a standby or idle node failed: node, cause
STANDBY_SWAP = "standby_swap"        # warm standbys replaced failed nodes: nodes
HOST_SELECTION = "host_selection"    # idle nodes joined the job: nodes, policy
PREEMPTION = "preemption"            # spare-pool nodes were preempted: nodes (count)
DEPLETED = "cluster_depleted"        # the job can never get its nodes back: short
PLANNED_STOP = "planned_stop"        # a checkpoint before a maintenance window: until_s
OPS_EVENT_KINDS = (DIAGNOSIS, REPAIR_BEGIN, REPAIR_END, RETIRED, IDLE_FAILURE, STANDBY_SWAP,
                   HOST_SELECTION, PREEMPTION, DEPLETED, PLANNED_STOP)

EVENT_KINDS = (
    JOB_START, STEPS, CHECKPOINT_BEGIN, CHECKPOINT_COMMIT, CHECKPOINT_ABORT, FAILURE,
    RESTART_BEGIN, WAIT, LOAD, RESTART_END, CORRUPTION_DETECTED, MAINTENANCE, JOB_END,
) + HPO_EVENT_KINDS + HPO_SWEEP_KINDS + OPS_EVENT_KINDS


def encode_event(t_s: float, event: str, **fields: Any) -> str:
    """One canonical JSONL line (without the newline) for an event."""
    if event not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {event!r}")
    record = {"t_s": t_s, "event": event, **fields}
    # 12 significant digits: stable across platforms, ample for seconds and bytes
    return dumps(record, float_digits=12)


def write_events(records: Iterable[Mapping[str, Any]], stream: TextIO) -> None:
    """Write records (each with ``t_s`` and ``event``) as canonical JSONL."""
    for rec in records:
        rec = dict(rec)
        t_s = rec.pop("t_s")
        event = rec.pop("event")
        stream.write(encode_event(t_s, event, **rec) + "\n")


def read_events(stream: TextIO) -> list[dict[str, Any]]:
    """Parse a JSONL event log back into dicts."""
    return [json.loads(line) for line in stream if line.strip()]
