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
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from prefect import get_run_logger

from juryflow.flows.lost_batches import CannotLook, LostBatches, Request
from juryflow.flows.runtime import progress
from juryflow.flows.tasks import JudgedChunk, judge_for
from juryflow.judges.batches.base import BatchClient, BatchUnsupported
from juryflow.judges.batches.records import (
    BatchFailure,
    BatchRequest,
    RequestKey,
    SubmittedBatch,
)
from juryflow.judges.batches.records import BatchStatus as RemoteStatus
from juryflow.judges.batches.resend import RESEND, failure_reason, resendable
from juryflow.judges.batches.samples import RoundRequests
from juryflow.judges.batches.waiting import poll_backoff, wait_for
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


def stored_to_resume(store: Store, run_id: str) -> list[Judgment]:
    """A resumed run's stored judgments of items without consensus, less the requests a
    batch left unanswered: their rows are dropped, and the requests sent again."""
    judgments = store.load_judgments(run_id, without_consensus=True)
    store.forget_unscored(run_id, [(j.item_id, j.judge_id) for j in judgments if resendable(j)])
    return [j for j in judgments if not resendable(j)]


@dataclass(slots=True)
class _Round:
    """One judge's requests of one round, by (item, sample), and what each may cost."""

    spec: JudgeSpec
    judge: LLMJudge
    client: BatchClient
    requests: RoundRequests
    bounds: dict[RequestKey, float] = field(default_factory=dict)
    """Each admitted call's most it may cost (``--max-cost``), released as it is answered."""

    @property
    def calls(self) -> dict[RequestKey, PreparedCall]:
        return self.requests.calls


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
        self.open: dict[Request, SubmittedBatch] = {}
        """Requests a journaled batch holds unanswered: read, never sent again."""
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
        self.answered: dict[tuple[str, str], dict[int, Judgment]] = {}
        """Samples read before ``--resume`` of judgments it judges again, by (item, judge)."""
        if plan.resumed:
            found = plan.store.run_samples(plan.run_id) | self.journal.samples_waiting(done)
            self.answered = {pair: read for pair, read in found.items() if pair not in done}
            sends = self.journal.open_sends(keep=lambda i, j: (i, j) not in done)
            for batch in sends.batches:
                for entry in batch.entries:
                    self.open[(entry.item_id, entry.judge_id, entry.sample)] = batch
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

        requests = RoundRequests(judge, self.answered)
        current = _Round(spec, judge, batch_client(judge.client, spec.id), requests)
        judgments = [j for j in map(current.requests.add, items) if j is not None]
        try:
            self.open.update(await self.lost.adopt(current.client, spec, current.calls))
        except CannotLook as error:
            raise BatchStop(str(error)) from None
        pending = self._journaled(current)
        fresh = [key for key in current.calls if (key[0], spec.id, key[1]) not in self.open]
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
            made = self._record_unanswered(current, fresh, None, str(error), None)
        except ProviderError as error:
            self._release(current, fresh)
            if error.fatal:  # a rejected key or an unknown model: every request would fail
                stopped = StoppedJudge(
                    spec.id, error.status, error.kind, 1, fix_for(spec, error), error.message
                )
                self.stopped[spec.id] = stopped
                made = self._record_unanswered(current, fresh, None, stopped.reason, None)
            elif error.retryable:  # still failing after the retries: for --resume to send
                reason = f"not sent in a batch: {error} {RESEND}"
                made = self._record_unanswered(current, fresh, None, reason, "unsent")
            else:
                reason = f"provider error sending the batch: {error}"
                made = self._record_unanswered(current, fresh, None, reason, None)
        for judgment in judgments:
            self.journal.append(judgment)
        progress.judged(judgments)
        try:
            judgments += made + await self._collect(current, pending)
        finally:
            self.journal.close()  # reopened by the next write; a run may hold many rounds
        held_items = tuple(dict.fromkeys(item_id for item_id, _ in held))
        return JudgedChunk(tuple(judgments), stopped, held_items)

    def _journaled(self, current: _Round) -> list[SubmittedBatch]:
        """The journaled batches holding some of this round's requests, each with only those."""
        judge_id = current.spec.id
        found: dict[str, tuple[SubmittedBatch, set[RequestKey]]] = {}
        for item_id, sample in current.calls:
            batch = self.open.get((item_id, judge_id, sample))
            if batch is not None:
                found.setdefault(batch.batch_id, (batch, set()))[1].add((item_id, sample))
        batches: list[SubmittedBatch] = []
        for batch, wanted in found.values():
            entries = tuple(e for e in batch.entries if e.judge_id == judge_id and e.key in wanted)
            batches.append(SubmittedBatch(batch.provider, batch.batch_id, entries))
            self.running[batch.batch_id] = batch
        return batches

    def _within_budget(
        self, current: _Round, keys: list[RequestKey]
    ) -> tuple[list[RequestKey], list[RequestKey]]:
        """The requests ``--max-cost`` can pay for at most, each counted at its upper bound
        (the prompt at ~4 characters a token and the whole output cap, at batch prices)
        until its answer says what it cost; the others, held back for ``--resume``. An
        item's samples are admitted all or none: its judgment needs every one."""
        budget = self.budget
        if budget is None or not keys:
            return keys, []
        price = price_for(current.judge.model, self.plan.panel.prices)
        most = current.spec.max_tokens
        state = budget.state()
        room = state.max_usd - state.spent_usd - self.reserved
        for number, key in enumerate(keys):
            prompt = current.calls[key].prompt
            bound = price.cost(len(prompt) // 4, most, batch=True) if price is not None else 0.0
            try:
                if bound > room:
                    raise BudgetReached("the batch would pass --max-cost")
                budget.start()
            except BudgetReached:
                self.held_back = True
                first = next(n for n, k in enumerate(keys) if k[0] == key[0])
                self._release(current, keys[first:number])
                return keys[:first], keys[first:]
            room -= bound
            self.reserved += bound
            current.bounds[key] = bound
        return keys, []

    def _settle(self, current: _Round, key: RequestKey, cost: float) -> None:
        bound = current.bounds.pop(key, None)
        if bound is not None and self.budget is not None:
            self.reserved -= bound
            self.budget.finish(cost)

    def _release(self, current: _Round, keys: Sequence[RequestKey]) -> None:
        for key in keys:
            self._settle(current, key, 0.0)

    async def _submit(
        self, current: _Round, keys: list[RequestKey]
    ) -> tuple[list[SubmittedBatch], list[Judgment]]:
        """Send the requests ``keys`` as batches, each journaled as soon as it exists; a
        passing failure is tried again for the requests no batch holds yet, so none is sent
        twice (see :meth:`LostBatches.submit`). Returns the batches, and the judgments of
        requests that could not be sent after some were (unscored, for ``--resume``)."""
        if not keys:
            return [], []
        spec = current.spec
        requests = [
            BatchRequest(item_id, spec.id, current.calls[(item_id, sample)].request, sample)
            for item_id, sample in keys
        ]
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
            sent = {entry.key for batch in created for entry in batch.entries}
            unsent = [key for key in keys if key not in sent]
            self._release(current, unsent)
            reason = f"not sent in a batch: {last} {RESEND}"
            return created, self._record_unanswered(current, unsent, None, reason, "unsent")
        return created, []

    def _record_unanswered(
        self,
        current: _Round,
        keys: Sequence[RequestKey],
        batch_id: str | None,
        reason: str,
        kind: str | None,
    ) -> list[Judgment]:
        """Unscored answers to the requests ``keys`` with ``reason``, and the judgments they
        complete; ``kind``: what became of the requests, when they are to be sent again
        (None: final)."""
        made: list[Judgment] = []
        for key in keys:
            call = current.calls[key]
            answer = current.judge.unanswered(call, reason, batch_id=batch_id, attempts=0)
            if kind is not None:
                self.unanswered[key[0]] = self.unanswered.get(key[0], 0) + 1
                self.unanswered_kinds[kind] = self.unanswered_kinds.get(kind, 0) + 1
            made += self._answered(current, key, answer)
        return made

    def _answered(self, current: _Round, key: RequestKey, answer: Judgment) -> list[Judgment]:
        """The judgment ``answer`` to request ``key`` completes (journaled), if any."""
        judgment = current.requests.answer(key, answer)
        if judgment is None:
            return []
        self.journal.append(judgment)
        progress.judged((judgment,))
        return [judgment]

    def _unanswered_batch(
        self, current: _Round, keys: Sequence[RequestKey], batch_id: str, failure: BatchFailure
    ) -> list[Judgment]:
        reason, again = failure_reason(batch_id, failure)
        return self._record_unanswered(
            current, keys, batch_id, reason, failure.kind if again else None
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
                keys = [entry.key for entry in batch.entries]
                self._release(current, keys)
                judgments += self._unanswered_batch(current, keys, batch.batch_id, status)
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
        read_keys: set[RequestKey] = set()
        made: list[Judgment] = []
        judge = current.judge

        async def read() -> None:
            async for result in current.client.results(batch):
                key = result.key
                call = current.calls.get(key)
                if call is None or key in read_keys:
                    continue
                read_keys.add(key)
                if result.response is not None:
                    answer = judge.answered(call, result.response, batch_id=batch.batch_id)
                    self._settle(current, key, answer.usage.cost_usd or 0.0)
                    made.extend(self._answered(current, key, answer))
                else:
                    assert result.failure is not None
                    self._settle(current, key, 0.0)
                    failure = result.failure
                    made.extend(self._unanswered_batch(current, [key], batch.batch_id, failure))

        try:
            await call_with_retries(read, lambda e: e.retryable, current.spec.max_attempts)
        except (RetriesExhausted, ProviderError) as error:
            last = error.last_error if isinstance(error, RetriesExhausted) else error
            unread = [e.key for e in batch.entries if e.key not in read_keys]
            self._release(current, unread)
            failure = BatchFailure("missing", f"its results could not be read: {last}")
            made += self._unanswered_batch(current, unread, batch.batch_id, failure)
        self.running.pop(batch.batch_id, None)
        return made

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
