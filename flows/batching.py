"""Batch mode (``--batch``, ``batch: true``): a round's calls of each batch judge go to its
provider's batch API (OpenAI Batch, Anthropic Message Batches) at the batch price.

Each judge's requests of a round become one batch (split at the provider's limits by the
client), journaled the moment the provider accepts it, polled with backoff (asleep in
between: no CPU held) and read back through the judge's own parsing, validation and span
anchoring, so a batch answer is judged exactly as a real-time one.

A run that stops while batches are in flight (Ctrl-C, SIGTERM, a cancellation in Prefect,
``--batch-wait``, kill -9) leaves them to finish at the provider: ``--resume`` polls the
same batches from the journal and reads their answers, paying for no request twice.

A run killed while it creates a batch may leave one the provider made but whose id never
reached the journal: found at the provider and adopted before its requests are sent again
(:mod:`juryflow.flows.lost_batches`).

A request a batch did not answer (expired, cancelled, an error worth trying again) is
stored unscored with the provider's reason, its item left without consensus, and the run
ends ``interrupted``: ``--resume`` sends those requests again, and only those. An error
that would repeat (a request the provider refused as invalid) is final, as in real time.

A judge whose server has no batch API (vLLM, Ollama, most compatible servers) is judged in
real time instead, with one warning naming the fix (``batch: false`` for that judge).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from prefect import get_run_logger

from juryflow.flows.lost_batches import CannotLook, LostBatches
from juryflow.flows.runtime import progress
from juryflow.flows.tasks import JudgedChunk, judge_for
from juryflow.judges.batches.base import BatchClient, BatchUnsupported
from juryflow.judges.batches.records import BatchFailure, BatchRequest, SubmittedBatch
from juryflow.judges.batches.records import BatchStatus as RemoteStatus
from juryflow.judges.batches.resend import RESEND, failure_reason, resendable
from juryflow.judges.batches.waiting import Backoff, wait_for
from juryflow.judges.breaker import JudgeStopped, StoppedJudge, fix_for
from juryflow.judges.budget import Budget, BudgetReached
from juryflow.judges.llm_judge import LLMJudge, PreparedCall
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.pricing import price_for
from juryflow.judges.providers.base import ProviderError
from juryflow.judges.retry import RetriesExhausted, call_with_retries
from juryflow.maths.records import Item, Judgment
from juryflow.storage.journal import Journal

if TYPE_CHECKING:
    from juryflow.planning.run_setup import RunPlan
    from juryflow.storage.store import Store

POLL_SECONDS_ENV = "JURYFLOW_BATCH_POLL_SECONDS"
"""The first wait between two polls of a batch, in seconds (default 5); each wait doubles,
up to twelve times the first (a minute by default)."""
DEFAULT_POLL_SECONDS = 5.0

Work = list[tuple[JudgeSpec, list[Item]]]


class BatchStop(Exception):
    """The run stops here, resumable: its batches outlasted ``--batch-wait``, or requests
    a batch left unanswered are to be sent again by ``--resume``. ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _WaitOver(Exception):
    """``--batch-wait`` ended before a judge's batches did; the run stops once every judge of
    the round has submitted and polled, so the stop names all the batches left running."""


class Judging(Protocol):
    """What batch mode needs of the run's chunk runner."""

    async def judge_work(
        self, work: Work, index: int, real_time: bool = False
    ) -> list[Judgment]: ...

    async def todo(
        self, spec: JudgeSpec, items: list[Item]
    ) -> tuple[list[Judgment], list[Item]]: ...

    def note_stopped(self, spec: JudgeSpec, chunk: JudgedChunk) -> None: ...


def poll_backoff() -> Backoff:
    """The polls' backoff, from ``JURYFLOW_BATCH_POLL_SECONDS`` (tests poll fast)."""
    raw = os.environ.get(POLL_SECONDS_ENV)
    try:
        first = float(raw) if raw is not None else DEFAULT_POLL_SECONDS
    except ValueError:
        first = -1.0
    if not 0 <= first < float("inf"):
        raise ValueError(f"{POLL_SECONDS_ENV}={raw!r}: give the first wait between polls, seconds")
    return Backoff(initial=first, factor=2.0, maximum=max(first * 12, first))


def stored_to_resume(store: Store, run_id: str) -> list[Judgment]:
    """A resumed run's stored judgments of items without consensus, less the requests a
    batch left unanswered: their rows are dropped, and the requests sent again."""
    judgments = store.load_judgments(run_id, without_consensus=True)
    store.forget_unscored(run_id, [(j.item_id, j.judge_id) for j in judgments if resendable(j)])
    return [j for j in judgments if not resendable(j)]


@dataclass(slots=True)
class _Round:
    """One judge's requests of one round: its calls by item, and what each may cost."""

    spec: JudgeSpec
    judge: LLMJudge
    client: BatchClient
    calls: dict[str, PreparedCall]
    bounds: dict[str, float] = field(default_factory=dict)
    """Each admitted call's most it may cost (``--max-cost``), released as it is answered."""


class BatchRounds:
    """The batches of one run, in the flow's process: submitted, journaled, waited for, read."""

    def __init__(
        self,
        plan: RunPlan,
        journal: Path,
        budget: Budget | None,
        wait_seconds: float | None,
        done: set[tuple[str, str]],
    ) -> None:
        self.plan = plan
        self.journal = Journal(journal)
        self.budget = budget
        self.backoff = poll_backoff()
        self.wait_seconds = wait_seconds
        self.deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
        self.fallback: dict[str, str] = {}
        """Judges whose server has no batch API, judged in real time: the line saying so."""
        self.running: dict[str, SubmittedBatch] = {}
        """Batches sent (or found in the journal) whose answers are not read yet."""
        self.open: dict[tuple[str, str], SubmittedBatch] = {}
        """(item, judge) pairs a journaled batch holds unanswered: read, never sent again."""
        self.unanswered: dict[str, int] = {}
        """This invocation's requests left unanswered by their batches, by item."""
        self.unanswered_kinds: dict[str, int] = {}
        """... and by what became of them (expired, errored, ...)."""
        self.held_back = False
        """Requests were not sent because ``--max-cost`` could not pay for them all."""
        self.stopped: dict[str, StoppedJudge] = {}
        """Judges whose batches were refused for good (a rejected key, an unknown model)."""
        self.reserved = 0.0
        self.lost = LostBatches(self.journal)
        if plan.resumed:
            sends = self.journal.open_sends(keep=lambda i, j: (i, j) not in done)
            for batch in sends.batches:
                for entry in batch.entries:
                    self.open[(entry.item_id, entry.judge_id)] = batch
            self.lost.load(sends)

    @classmethod
    def of(
        cls,
        plan: RunPlan,
        journal: Path,
        budget: Budget | None,
        wait_seconds: float | None,
        done: set[tuple[str, str]],
    ) -> BatchRounds | None:
        """The run's batches; None when no judge of its panel sends batches."""
        if not any(plan.panel.uses_batch(spec) for spec in plan.panel.judges):
            return None
        return cls(plan, journal, budget, wait_seconds, done)

    def takes(self, spec: JudgeSpec) -> bool:
        return self.plan.panel.uses_batch(spec) and spec.id not in self.fallback

    async def judge_work(self, runner: Judging, work: Work, index: int) -> list[Judgment]:
        """Each judge's answers on its items: batch judges through batches, the others (and
        those whose server has no batch API) in real time, all at once."""
        work = [(spec, items) for spec, items in work if items]
        now = [(spec, items) for spec, items in work if not self.takes(spec)]
        batched = [(spec, items) for spec, items in work if self.takes(spec)]
        results = await asyncio.gather(
            runner.judge_work(now, index, real_time=True),
            *(self._judge(runner, spec, items) for spec, items in batched),
        )
        if any(isinstance(answers, _WaitOver) for answers in results):
            left = len(self.running)
            noun = "batch" if left == 1 else "batches"
            raise BatchStop(
                f"--batch-wait {self.wait_seconds:g} s passed with {left} {noun} still running "
                "at the provider (left to finish)"
            )
        judged = [j for answers in results if isinstance(answers, list) for j in answers]
        fell_back = [w for w, answers in zip(batched, results[1:], strict=True) if answers is None]
        return judged + (
            await runner.judge_work(fell_back, index, real_time=True) if fell_back else []
        )

    async def _judge(
        self, runner: Judging, spec: JudgeSpec, items: list[Item]
    ) -> list[Judgment] | _WaitOver | None:
        cached, todo = await runner.todo(spec, items)
        progress.judged(cached)
        try:
            chunk = await self.judge(spec, todo) if todo else JudgedChunk(())
        except _WaitOver as over:  # the others still submit theirs: a stop names them all
            return over
        if chunk is None:
            return None
        runner.note_stopped(spec, chunk)
        return cached + list(chunk.judgments)

    async def judge(self, spec: JudgeSpec, items: list[Item]) -> JudgedChunk | None:
        """``spec``'s judgments of ``items`` from batches; None when its server has no batch
        API (the caller judges them in real time). Items ``--max-cost`` cannot pay for are
        left unjudged, for ``--resume``."""
        judge = judge_for(spec, self.plan.panel.prices)
        if not isinstance(judge, LLMJudge):
            return None
        from juryflow.judges.batches.factory import batch_client  # imports the SDKs

        current = _Round(spec, judge, batch_client(judge.client, spec.id), {})
        judgments: list[Judgment] = []
        for item in items:
            call = judge.prepare(item)
            if isinstance(call, Judgment):
                judgments.append(call)  # no prompt, no call
            else:
                current.calls[item.item_id] = call
        try:
            self.open.update(await self.lost.adopt(current.client, spec, current.calls))
        except CannotLook as error:
            raise BatchStop(str(error)) from None
        pending = self._journaled(current)
        fresh = [c for i, c in current.calls.items() if (i, spec.id) not in self.open]
        fresh, held = self._within_budget(current, fresh)
        stopped = self.stopped.get(spec.id)
        made: list[Judgment] = []  # journaled already
        try:
            if stopped is not None:  # an earlier round found its key or model refused
                raise JudgeStopped(stopped)
            created, made = await self._submit(current, fresh)
            pending += created
        except BatchUnsupported as error:
            self._release(current, fresh)
            if pending:  # a server that holds this judge's batches has a batch API
                raise
            line = f"judge {spec.id!r} is judged in real time, at full price: {error.message}"
            self.fallback[spec.id] = line  # the command line's summary says it too
            get_run_logger().warning(line)
            return None
        except JudgeStopped as error:
            self._release(current, fresh)
            judgments += [judge.unanswered(call, str(error), attempts=0) for call in fresh]
        except ProviderError as error:
            self._release(current, fresh)
            if error.fatal:  # a rejected key or an unknown model: every request would fail
                stopped = StoppedJudge(
                    spec.id, error.status, error.kind, 1, fix_for(spec, error), error.message
                )
                self.stopped[spec.id] = stopped
                judgments += [judge.unanswered(c, stopped.reason, attempts=0) for c in fresh]
            elif error.retryable:  # still failing after the retries: for --resume to send
                reason = f"not sent in a batch: {error} {RESEND}"
                made = self._record_unanswered(current, fresh, None, reason, "unsent")
            else:
                reason = f"provider error sending the batch: {error}"
                judgments += [judge.unanswered(call, reason, attempts=0) for call in fresh]
        for judgment in judgments:
            self.journal.append(judgment)
        progress.judged(judgments)
        try:
            judgments += made + await self._collect(current, pending)
        finally:
            self.journal.close()  # reopened by the next write; a run may hold many rounds
        return JudgedChunk(tuple(judgments), stopped, tuple(c.item.item_id for c in held))

    def _journaled(self, current: _Round) -> list[SubmittedBatch]:
        """The journaled batches holding some of this round's requests, each with only those."""
        judge_id = current.spec.id
        found: dict[str, list[str]] = {}
        for item_id in current.calls:
            batch = self.open.get((item_id, judge_id))
            if batch is not None:
                found.setdefault(batch.batch_id, []).append(item_id)
        batches: list[SubmittedBatch] = []
        for item_ids in found.values():
            batch = self.open[(item_ids[0], judge_id)]
            wanted = set(item_ids)
            entries = tuple(
                e for e in batch.entries if e.judge_id == judge_id and e.item_id in wanted
            )
            batches.append(SubmittedBatch(batch.provider, batch.batch_id, entries))
            self.running[batch.batch_id] = batch
        return batches

    def _within_budget(
        self, current: _Round, calls: list[PreparedCall]
    ) -> tuple[list[PreparedCall], list[PreparedCall]]:
        """The calls ``--max-cost`` can pay for at most, each counted at its upper bound (the
        prompt at ~4 characters a token and the whole output cap, at batch prices) until
        its answer says what it cost; the others, held back for ``--resume``."""
        budget = self.budget
        if budget is None or not calls:
            return calls, []
        price = price_for(current.judge.model, self.plan.panel.prices)
        most = current.spec.max_tokens
        state = budget.state()
        room = state.max_usd - state.spent_usd - self.reserved
        admitted: list[PreparedCall] = []
        for number, call in enumerate(calls):
            bound = (
                price.cost(len(call.prompt) // 4, most, batch=True) if price is not None else 0.0
            )
            try:
                if bound > room:
                    raise BudgetReached("the batch would pass --max-cost")
                budget.start()
            except BudgetReached:
                self.held_back = True
                return admitted, calls[number:]
            room -= bound
            self.reserved += bound
            current.bounds[call.item.item_id] = bound
            admitted.append(call)
        return admitted, []

    def _settle(self, current: _Round, item_id: str, cost: float) -> None:
        bound = current.bounds.pop(item_id, None)
        if bound is not None and self.budget is not None:
            self.reserved -= bound
            self.budget.finish(cost)

    def _release(self, current: _Round, calls: Sequence[PreparedCall]) -> None:
        for call in calls:
            self._settle(current, call.item.item_id, 0.0)

    async def _submit(
        self, current: _Round, calls: list[PreparedCall]
    ) -> tuple[list[SubmittedBatch], list[Judgment]]:
        """Send ``calls`` as batches, each journaled as soon as it exists; a passing failure
        is tried again for the requests no batch holds yet, so none is sent twice (see
        :meth:`LostBatches.submit`). Returns the batches, and the unscored judgments of
        requests that could not be sent after some were (for ``--resume`` to send)."""
        if not calls:
            return [], []
        spec = current.spec
        requests = [BatchRequest(c.item.item_id, spec.id, c.request) for c in calls]
        created: list[SubmittedBatch] = []

        def on_created(batch: SubmittedBatch) -> None:
            self.journal.append_batch(batch)
            self.running[batch.batch_id] = batch
            created.append(batch)

        try:
            await self.lost.submit(current.client, requests, on_created, spec.max_attempts)
        except (RetriesExhausted, ProviderError) as error:
            last = error.last_error if isinstance(error, RetriesExhausted) else error
            if not created:
                raise last from None
            # Part of it was sent (and journaled): the rest waits for --resume to send it.
            sent = {entry.item_id for batch in created for entry in batch.entries}
            unsent = [c for c in calls if c.item.item_id not in sent]
            self._release(current, unsent)
            reason = f"not sent in a batch: {last} {RESEND}"
            return created, self._record_unanswered(current, unsent, None, reason, "unsent")
        return created, []

    def _record_unanswered(
        self,
        current: _Round,
        calls: Sequence[PreparedCall],
        batch_id: str | None,
        reason: str,
        kind: str | None,
    ) -> list[Judgment]:
        """Unscored judgments of ``calls`` with ``reason``; ``kind``: what became of the
        requests, when they are to be sent again (None: final)."""
        made = [
            current.judge.unanswered(call, reason, batch_id=batch_id, attempts=0) for call in calls
        ]
        for judgment in made:
            self.journal.append(judgment)
            if kind is not None:
                self.unanswered[judgment.item_id] = self.unanswered.get(judgment.item_id, 0) + 1
                self.unanswered_kinds[kind] = self.unanswered_kinds.get(kind, 0) + 1
        progress.judged(made)
        return made

    def _unanswered_batch(
        self, current: _Round, calls: Sequence[PreparedCall], batch_id: str, failure: BatchFailure
    ) -> list[Judgment]:
        reason, again = failure_reason(batch_id, failure)
        return self._record_unanswered(
            current, calls, batch_id, reason, failure.kind if again else None
        )

    async def _collect(self, current: _Round, batches: list[SubmittedBatch]) -> list[Judgment]:
        """Wait for ``batches`` and read their answers; raises :class:`_WaitOver` when
        ``--batch-wait`` ends first (the answers of the batches that ended are kept)."""
        if not batches:
            return []
        ended = await asyncio.gather(*(self._wait(current, batch) for batch in batches))
        judgments: list[Judgment] = []
        for batch, status in zip(batches, ended, strict=True):
            if status is True:
                judgments += await self._read(current, batch)
            elif isinstance(status, BatchFailure):  # it cannot be polled: lost to this run
                calls = [current.calls[e.item_id] for e in batch.entries]
                self._release(current, calls)
                judgments += self._unanswered_batch(current, calls, batch.batch_id, status)
                self.running.pop(batch.batch_id, None)
        if any(status is None for status in ended):
            raise _WaitOver
        return judgments

    async def _wait(
        self, current: _Round, batch: SubmittedBatch
    ) -> Literal[True] | BatchFailure | None:
        """True once ``batch`` has ended; None if ``--batch-wait`` ended first; a failure
        when the provider no longer knows it (or refuses to say)."""
        spec = current.spec

        def on_status(s: RemoteStatus) -> None:
            progress.emit(progress.BatchStatus(spec.id, s.batch_id, s.state, s.done, s.total))

        timeout = None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)
        try:
            statuses = await wait_for(
                current.client, [batch.batch_id], on_status, self.backoff, timeout=timeout
            )
        except ProviderError as error:
            return BatchFailure("missing", f"the batch could not be polled: {error}")
        status = statuses.get(batch.batch_id)
        return True if status is not None and status.ended else None

    async def _read(self, current: _Round, batch: SubmittedBatch) -> list[Judgment]:
        """The judgments of an ended batch, each journaled as it is made; read again from the
        start if the results stream breaks off (nothing is sent to a model again)."""
        made: dict[str, Judgment] = {}
        judge = current.judge

        async def read() -> None:
            async for result in current.client.results(batch):
                call = current.calls.get(result.item_id)
                if call is None or result.item_id in made:
                    continue
                if result.response is not None:
                    judgment = judge.answered(call, result.response, batch_id=batch.batch_id)
                    cost = judgment.usage.cost_usd or 0.0
                    self._settle(current, result.item_id, cost)
                    self.journal.append(judgment)
                    progress.judged((judgment,))
                else:
                    assert result.failure is not None
                    self._settle(current, result.item_id, 0.0)
                    failure = result.failure
                    (judgment,) = self._unanswered_batch(current, [call], batch.batch_id, failure)
                made[result.item_id] = judgment

        try:
            await call_with_retries(read, lambda e: e.retryable, current.spec.max_attempts)
        except (RetriesExhausted, ProviderError) as error:
            last = error.last_error if isinstance(error, RetriesExhausted) else error
            unread = [current.calls[e.item_id] for e in batch.entries if e.item_id not in made]
            self._release(current, unread)
            failure = BatchFailure("missing", f"its results could not be read: {last}")
            for judgment in self._unanswered_batch(current, unread, batch.batch_id, failure):
                made[judgment.item_id] = judgment
        self.running.pop(batch.batch_id, None)
        return list(made.values())

    def waits_for_resend(self, item_id: str) -> bool:
        """Whether a request of the item is to be sent again: it gets no consensus yet."""
        return item_id in self.unanswered

    def check_answered(self) -> None:
        """At the run's end: raises :class:`BatchStop` when requests wait to be sent again."""
        left = sum(self.unanswered.values())
        if not left:
            return
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.unanswered_kinds.items()))
        noun = "request" if left == 1 else "requests"
        raise BatchStop(
            f"{left} {noun} not answered in their batches ({kinds}), stored unscored with "
            "the provider's reason; --resume sends only those again"
        )

    def left_running(self) -> str:
        """What becomes of the batches still running when the run stops: one sentence."""
        count = len(self.running)
        if not count:
            return ""
        noun = "batch is" if count == 1 else "batches are"
        return (
            f"{count} {noun} left running at the provider (not cancelled); --resume reads "
            "their answers and pays for no request twice. "
        )


def check_answered(batches: BatchRounds | None) -> None:
    """At the run's end: raises :class:`BatchStop` when requests wait to be sent again."""
    if batches is not None:
        batches.check_answered()
