"""A run's write-ahead journal: every judgment, one JSON line, the moment it completes;
and in batch mode every batch before its create request is sent (``{"creating": ...}``,
its intent) and the moment the provider accepts it (``{"batch": ...}``).

DuckDB receives judgments a chunk at a time (one transaction per chunk keeps writes fast),
so a run killed mid-chunk would lose the calls that chunk had already paid for. Each
judgment is therefore also appended here with a single unbuffered ``write``; the kernel
keeps it even if the process is killed with SIGKILL, and ``--resume`` replays it into the
store before judging what is left. A run that completes deletes its journal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juryflow.judges.batches.records import BatchEntry, BatchIntent, SubmittedBatch
from juryflow.judges.batches.resend import resendable
from juryflow.judges.redact import redact_text
from juryflow.maths.records import Judgment, Span, Usage
from juryflow.storage.connection import StoreError
from juryflow.storage.files import open_private_append, private_dir
from juryflow.storage.store.records import RunRecord

if TYPE_CHECKING:
    from juryflow.storage.lake.attach import LakeTarget

_JUDGMENT_FIELDS = tuple(f.name for f in dataclasses.fields(Judgment))
_SPAN_FIELDS = tuple(f.name for f in dataclasses.fields(Span))
_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))


JOURNAL_DIR_ENV = "JURYFLOW_JOURNAL_DIR"


def journal_path(db_path: Path | LakeTarget, run_id: str) -> Path:
    """Beside a DuckDB file; for a lake, on this machine: ``$JURYFLOW_JOURNAL_DIR``, else
    ``~/.local/state/juryflow/journals/<lake>`` (a shard resumed elsewhere finds what the
    lake stored, and judges again only what this machine's journal held)."""
    if isinstance(db_path, Path):
        return db_path.parent / f"{db_path.name}.journal" / f"{run_id}.jsonl"
    chosen = os.environ.get(JOURNAL_DIR_ENV)
    if chosen:
        base = Path(chosen).expanduser()
    else:
        state = os.environ.get("XDG_STATE_HOME")
        base = (Path(state) if state else Path.home() / ".local" / "state") / "juryflow"
        base = base.expanduser() / "journals"
    lake = hashlib.sha256(f"{db_path.kind}:{db_path.catalog}".encode()).hexdigest()[:16]
    return base / f"lake-{lake}" / f"{run_id}.jsonl"


def judgment_to_json(judgment: Judgment) -> str:
    return json.dumps(_judgment_data(judgment), separators=(",", ":"))


def _judgment_data(judgment: Judgment) -> dict[str, Any]:
    # By hand rather than dataclasses.asdict, which deep-copies every field: this runs once
    # per model call on the event loop.
    data = {name: getattr(judgment, name) for name in _JUDGMENT_FIELDS}
    # A sampled judge's samples travel with its reduced judgment, so a resume stores them.
    data["samples"] = [_judgment_data(sample) for sample in judgment.samples]
    data["spans"] = [
        {name: getattr(span, name) for name in _SPAN_FIELDS} for span in judgment.spans
    ]
    data["usage"] = {name: getattr(judgment.usage, name) for name in _USAGE_FIELDS}
    if judgment.unscored_reason:
        # Judges clean their reasons already; this file outlives a crash, so it checks again.
        data["unscored_reason"] = redact_text(judgment.unscored_reason)
    return data


def judgment_from_json(text: str) -> Judgment:
    return _judgment_from_data(json.loads(text))


def _judgment_from_data(data: dict[str, Any]) -> Judgment:
    data["spans"] = tuple(Span(**span) for span in data.get("spans", ()))
    data["usage"] = Usage(**data.get("usage", {}))
    data["samples"] = tuple(_judgment_from_data(sample) for sample in data.get("samples", ()))
    return Judgment(**data)


def run_header_path(journal: Path) -> Path:
    """Beside the journal: the run's own row, from which ``--resume`` rebuilds a store that
    was deleted during the run (the journal alone holds judgments, not what the run is)."""
    return journal.with_name(journal.name.removesuffix(".jsonl") + ".run.json")


def write_run_header(journal: Path, record: RunRecord) -> None:
    data = dataclasses.asdict(record)
    for name in ("started_at", "finished_at"):
        if data[name] is not None:
            data[name] = data[name].isoformat()
    private_dir(journal.parent)
    path = run_header_path(journal)
    fd = open_private_append(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(data).encode("utf-8"))
    finally:
        os.close(fd)


def read_run_header(journal: Path) -> RunRecord | None:
    """The run row kept beside ``journal``, or None if there is none (or it is unreadable)."""
    try:
        data = json.loads(run_header_path(journal).read_text(encoding="utf-8"))
        for name in ("started_at", "finished_at"):
            if data.get(name) is not None:
                data[name] = datetime.fromisoformat(data[name])
        return RunRecord(**data)
    except (OSError, ValueError, TypeError):
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class OpenSends:
    """What a journal's batch lines leave open (see :meth:`Journal.open_sends`)."""

    batches: list[SubmittedBatch]
    intents: list[tuple[BatchIntent, tuple[BatchEntry, ...]]]
    """Intents no batch line settled, whole (their batch, if the provider made it, holds
    all their requests: it is found by them), each with its entries still open."""
    batch_ids: set[str]


class JournalWriteError(StoreError):
    """A judgment could not be journaled (a full disk, say): the run must stop calling, as
    what it pays for could not be kept."""


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def append(self, judgment: Judgment) -> None:
        self._write((judgment_to_json(judgment) + "\n").encode("utf-8"))

    def append_batch(self, batch: SubmittedBatch) -> None:
        """A batch the provider has accepted, written before it is first polled: a run
        killed while it runs resumes by reading it, and pays for none of its requests twice."""
        self._write(('{"batch":' + batch.to_json() + "}\n").encode("utf-8"))

    def append_intent(self, intent: BatchIntent) -> None:
        """A batch about to be created, written before its create request is sent: a run
        killed before the provider's answer came back finds the batch at the provider
        (``BatchClient.find``) instead of paying for a second one."""
        self._write(('{"creating":' + intent.to_json() + "}\n").encode("utf-8"))

    def _write(self, line: bytes) -> None:
        try:
            if self._fd is None:
                private_dir(self.path.parent)
                # O_APPEND makes each line one atomic write even with several writers.
                self._fd = open_private_append(self.path)
            os.write(self._fd, line)
        except OSError as error:
            raise JournalWriteError(
                f"cannot write the run's journal {self.path}: {error}"
            ) from error

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def replay(self, keep: Callable[[str, str], bool] | None = None) -> list[Judgment]:
        """Judgments in the journal; a line cut short by the kill is skipped.

        ``keep(item_id, judge_id)`` picks the ones wanted before a judgment is built: a
        killed long run's journal holds every judgment since it started, most of them
        stored already, and only the others need to be in memory.
        """
        if not self.path.exists():
            return []
        judgments: dict[tuple[str, str], Judgment] = {}
        with self.path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    data = json.loads(line)
                    pair = (str(data["item_id"]), str(data["judge_id"]))
                    if keep is not None and not keep(*pair):
                        continue
                    judgments[pair] = _judgment_from_data(data)
                except (ValueError, TypeError, KeyError):
                    continue
        return list(judgments.values())

    def samples_waiting(
        self, done: set[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[int, Judgment]]:
        """The scored samples of the journaled judgments a batch left waiting for another
        sample (unscored, for ``--resume`` to send it), by (item, judge) and sample index;
        none of the ``done`` pairs."""
        return {
            (judgment.item_id, judgment.judge_id): {
                index: sample for index, sample in enumerate(judgment.samples) if sample.scored
            }
            for judgment in self.replay(keep=lambda i, j: (i, j) not in done)
            if resendable(judgment) and judgment.samples
        }

    def open_batches(self, keep: Callable[[str, str], bool] | None = None) -> list[SubmittedBatch]:
        """The journaled batches, each with only its requests that no later line answered
        (and ``keep(item_id, judge_id)`` accepts); batches left with none are dropped."""
        return self.open_sends(keep).batches

    def open_sends(self, keep: Callable[[str, str], bool] | None = None) -> OpenSends:
        """What the journal's batch lines leave open: the batches (as :meth:`open_batches`),
        the intents whose batch may exist unknown to the run (created, its id never
        journaled), each with only its requests that no later line answered or sent again,
        and the id of every batch journaled."""
        if not self.path.exists():
            return OpenSends([], [], set())
        sends: list[SubmittedBatch | BatchIntent] = []
        # The line each (item, judge) pair's samples were last sent (or meant) in; the pair's
        # judgment line settles them all (a sampled judge journals only its reduction).
        latest: dict[tuple[str, str], dict[int, int]] = {}
        with self.path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    data = json.loads(line)
                    if "batch" in data:
                        send: SubmittedBatch | BatchIntent = SubmittedBatch.from_json(
                            json.dumps(data["batch"])
                        )
                    elif "creating" in data:
                        send = BatchIntent.from_json(json.dumps(data["creating"]))
                    else:
                        latest.pop((str(data["item_id"]), str(data["judge_id"])), None)
                        continue
                    for entry in send.entries:
                        pair = (entry.item_id, entry.judge_id)
                        latest.setdefault(pair, {})[entry.sample] = len(sends)
                    sends.append(send)
                except (ValueError, TypeError, KeyError):
                    continue  # a line cut short by the kill
        found = OpenSends([], [], set())
        for index, send in enumerate(sends):
            if isinstance(send, SubmittedBatch):
                found.batch_ids.add(send.batch_id)
            entries = tuple(
                e
                for e in send.entries
                if latest.get((e.item_id, e.judge_id), {}).get(e.sample) == index
                and (keep is None or keep(e.item_id, e.judge_id))
            )
            if not entries:
                continue
            if isinstance(send, SubmittedBatch):
                found.batches.append(dataclasses.replace(send, entries=entries))
            else:
                found.intents.append((send, entries))
        return found

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        run_header_path(self.path).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # other runs' journals may still be there
            self.path.parent.rmdir()
