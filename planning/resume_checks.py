"""What ``--resume`` checks before the first call: the dataset is the one the run read, and
the journal holds only judgments the run can use.

Both are decided up front because finding out later costs money: a changed dataset mixes
items of two versions into one run, and a journal entry by a judge the panel does not have
fails the chunk it belongs to only after every other call of that chunk has been paid for.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from juryflow.storage.datasets import DatasetError, dataset_fingerprint
from juryflow.storage.journal import journal_path
from juryflow.storage.lake.attach import LakeTarget
from juryflow.storage.paths import reason
from juryflow.storage.store import RunRecord


class ResumeError(ValueError):
    """The run cannot be resumed as it is; the message says what to do instead."""


def _size(fingerprint: str) -> str | None:
    """The byte count at the end of ``sha256:<hex>:<size>``, when it has that shape."""
    tail = fingerprint.rpartition(":")[2]
    return tail if tail.isdigit() else None


def check_dataset(run: RunRecord) -> list[str]:
    """Refuse a dataset that is gone or changed since ``run`` started; warnings otherwise."""
    flag = f"--resume {run.run_id}"
    if not run.dataset:
        raise ResumeError(f"{flag}: the run records no dataset; start a new run")
    dataset = Path(run.dataset)
    if not dataset.is_file():
        raise ResumeError(
            f"{flag}: its dataset {dataset} is gone; put the file the run read back there, "
            "or start a new run"
        )
    if run.dataset_fingerprint is None:
        return [
            f"run {run.run_id} started before juryflow recorded dataset fingerprints, so "
            f"--resume cannot tell whether {dataset} changed since; resuming anyway"
        ]
    try:
        now = dataset_fingerprint(dataset)
    except DatasetError as error:
        raise ResumeError(f"{flag}: {error}") from None
    if now != run.dataset_fingerprint:
        then_size, now_size = _size(run.dataset_fingerprint), _size(now)
        sizes = (
            f" ({then_size} bytes then, {now_size} now)"
            if then_size and now_size and then_size != now_size
            else ""
        )
        raise ResumeError(
            f"{flag}: the dataset {dataset} changed since the run started{sizes}; resuming "
            "would mix items of two versions in one run. Restore the file the run read, or "
            "start a new run on the new one"
        )
    return []


def _judge_of(line: bytes) -> str | None:
    """The judge a journal line names; None for a line the replay skips anyway (torn)."""
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    judge = data.get("judge_id") if isinstance(data, dict) else None
    return judge if isinstance(judge, str) else None


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from handle


def set_aside_unknown_judges(
    db_path: Path | LakeTarget, run_id: str, judges: set[str]
) -> list[str]:
    """Move journal entries by judges not in the run's panel to a side file; warnings.

    Their judgments cannot join the panel's consensus; kept in the journal they would fail
    the chunk of their item. The side file keeps what was paid for, for inspection.
    """
    journal = journal_path(db_path, run_id)
    try:
        unknown = Counter(
            judge
            for judge in map(_judge_of, _lines(journal))
            if judge is not None and judge not in judges
        )
    except FileNotFoundError:
        return []
    except OSError as error:
        raise ResumeError(
            f"--resume {run_id}: cannot read its journal {journal}: {reason(error)}"
        ) from None
    if not unknown:
        return []
    aside = journal.with_name(f"{run_id}.unknown-judges.jsonl")
    kept = journal.with_name(f"{run_id}.jsonl.tmp")
    try:
        with kept.open("wb") as keep, aside.open("ab") as other:
            for line in _lines(journal):
                judge = _judge_of(line)
                (other if judge is not None and judge not in judges else keep).write(line)
        os.replace(kept, journal)
    except OSError as error:
        raise ResumeError(
            f"--resume {run_id}: cannot rewrite its journal {journal}: {reason(error)}; "
            "make its directory writable"
        ) from None
    names = ", ".join(f"{judge!r} ({n})" for judge, n in sorted(unknown.items()))
    return [
        f"the journal of run {run_id} holds {sum(unknown.values())} judgment(s) by judges "
        f"not in its panel: {names}; they cannot be used and were moved to {aside}"
    ]
