"""The attempt journals of a real sweep, read back when a rerun resumes it.

Each segment of an attempt (the whole attempt, or one rung's stretch of it under a
stopping scheduler) has a journal the trial's own process appends to
(:mod:`real_runs.hpo.worker`): one JSON line per record — an epoch's value (``kind:
epoch``), a checkpoint on disk (``kind: ckpt``) — each with ``t``, seconds since the
worker received the segment. The driver never needs them while it lives (the
worker's answer carries the same records); after a driver was killed they are what
the attempts running then did, so a rerun keeps their epochs' values instead of
losing them.

The file is the testbed's own, but it is read like every input: through the input
boundary (regular file, size limit, UTF-8), each line parsed on its own. A line cut
short by the kill (the last one) is dropped; any other damage is an
:class:`~testbed.errors.InputError` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

from testbed.errors import InputError
from testbed.io.read import parse_json, read_text


def journal_path(trial_dir: Path, attempt: int, from_epoch: int) -> Path:
    """The journal of ``attempt``'s segment starting at ``from_epoch``."""
    return trial_dir / f"attempt-{attempt:03d}-from-{from_epoch:04d}.jsonl"


def read_journal(path: Path) -> list[dict]:
    """The merged per-epoch records of one journal (empty when there is none)."""
    if not path.exists():
        return []
    text = read_text(path, field="journal")
    lines = text.split("\n")
    complete, tail = lines[:-1], lines[-1]   # no newline at the end: cut by the kill
    records = []
    for i, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        rec = parse_json(line, source=str(path), line=i)
        if not isinstance(rec, dict) or rec.get("kind") not in ("epoch", "ckpt") \
                or not isinstance(rec.get("epoch"), int) or not isinstance(
                    rec.get("t"), (int, float)):
            raise InputError("not an attempt journal record", source=str(path), line=i)
        records.append(rec)
    del tail
    from real_runs.hpo.trial import merge_records
    return merge_records(records)
