"""A judge backed by a language model: render, call (limited, retried), parse, anchor."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass

from juryflow.judges.anchoring import anchor_spans
from juryflow.judges.breaker import CircuitBreaker, JudgeStopped
from juryflow.judges.budget import EXPECTED_OUTPUT_TOKENS, Budget, BudgetReached
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.parsing import OutputParseError, parse_output
from juryflow.judges.pricing import cost_usd
from juryflow.judges.providers.base import ModelClient, ModelRequest, ModelResponse, ProviderError
from juryflow.judges.providers.price import Price
from juryflow.judges.ratelimit import Limiter, estimate_tokens, limiter_for, limiter_key
from juryflow.judges.redact import redact_text, remember_secret
from juryflow.judges.retry import RetriesExhausted, call_with_retries
from juryflow.maths.records import Item, Judgment, OutputKind, Usage, unscored
from juryflow.prompts.loader import PromptError, PromptTemplate

log = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 200_000
"""A longer answer is not parsed: the judgment is unscored ("answer too long: ..."), its raw
output the answer's first MAX_ANSWER_CHARS characters. The seed prompts ask for a short JSON
object (under 3,000 characters; at the default max_tokens of 2,048 a model writes at most
~10,000), so this is no judge's real answer; what it bounds is the work a model, or whoever
steers it, can put in this process's event loop: parsing and anchoring an answer cost
seconds at a few hundred thousand characters."""


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """One item's call as the judge makes it: the request, the whole prompt, and what its
    judgment records besides the answer (prompt name and hash, model, cache key, ...).

    A batch sends ``request`` inside a batch and turns what comes back into a judgment with
    :meth:`LLMJudge.answered` or :meth:`LLMJudge.unanswered`, as a real-time call does."""

    item: Item
    request: ModelRequest
    prompt: str
    common: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class CacheKeys:
    """An LLM judge's cache keys and verdict threshold, without its model client: the flow
    looks answers up in the cache where the calls are made elsewhere (``--workers``), and
    need not import the SDKs for that."""

    spec: JudgeSpec
    template: PromptTemplate

    @classmethod
    def of(cls, spec: JudgeSpec) -> CacheKeys | None:
        """None for a judge that is not an LLM judge (no cache)."""
        return None if spec.provider == "offline" else cls(spec, spec.template())

    @property
    def verdict_threshold(self) -> float:
        # The panel may override the threshold the prompt declares.
        if self.spec.verdict_threshold is not None:
            return self.spec.verdict_threshold
        return self.template.verdict_threshold

    def cache_key(self, item: Item) -> str:
        """Identifies the answer this judge would give ``item``; raises PromptError."""
        return prompt_cache_key(self.spec, self.template.render(item.variables))


def provider_cache_key(spec: JudgeSpec, template: PromptTemplate) -> str:
    """The key OpenAI routes this judge's calls by (``prompt_cache_key``): one per judge and
    template text, so calls sharing the static part reach the machines that cached it."""
    digest = hashlib.sha256(f"{spec.id}|{template.sha256}".encode()).hexdigest()
    return f"juryflow-{digest[:32]}"


def prompt_cache_key(spec: JudgeSpec, prompt: str) -> str:
    """The judgment cache's key for ``spec`` answering the rendered ``prompt``."""
    payload = {
        "provider": spec.provider,
        "model": spec.model,
        "params": spec.call_parameters(),
        "prompt_sha": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


class LLMJudge:
    """Implements :class:`~juryflow.judges.base.Judge`; a failure per item is an unscored row."""

    def __init__(
        self,
        spec: JudgeSpec,
        client: ModelClient,
        template: PromptTemplate,
        prices: Mapping[str, Price] | None = None,
        *,
        limiter: Limiter | None = None,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        max_answer_chars: int = MAX_ANSWER_CHARS,
    ) -> None:
        if spec.model is None:
            raise ValueError(f"judge {spec.id!r} has no model")
        self.spec = spec
        self.client = client
        self.template = template
        self.prices = dict(prices or {})
        self.judge_id: str = spec.id
        self.output_kind: OutputKind = template.output_kind
        self.model: str = spec.model
        self.keys = CacheKeys(spec, template)
        self.provider_cache_key = provider_cache_key(spec, template)
        self.verdict_threshold: float = self.keys.verdict_threshold
        self.limiter = limiter if limiter is not None else limiter_for(spec)
        # The client's connection pool is sized to what this judge's limiter lets in flight.
        size_pool = getattr(client, "size_pool", None)
        if size_pool is not None:
            size_pool(limiter_key(spec), self.limiter.max_concurrency)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_answer_chars = max_answer_chars
        # Header values and base_url credentials: a server may echo them into any answer.
        self._secrets = tuple(spec.credentials())
        remember_secret(*self._secrets)
        self._closed = False
        # Output tokens of the calls answered so far, for the budget's estimate of the next.
        self._outputs = [0, 0]

    def __repr__(self) -> str:
        return f"LLMJudge({self.judge_id!r}, {self.spec.provider}:{self.model})"

    async def aclose(self) -> None:
        """Release the client's connections for this event loop (call once a run is done)."""
        self._closed = True
        await self.client.aclose()

    def cache_key(self, item: Item) -> str:
        """Identifies the answer this judge would give ``item``; raises PromptError."""
        return self.keys.cache_key(item)

    def _cache_key(self, prompt: str) -> str:
        return prompt_cache_key(self.spec, prompt)

    def call_estimate(self, prompt: str) -> float:
        """What a call of ``prompt`` is expected to cost, reserved by ``--max-cost`` while it
        runs: the prompt at ~4 characters a token and this judge's mean output so far (a
        guess before its first answer); 0 for a model without a price (refused up front)."""
        total, answered = self._outputs
        output = total / answered if answered else EXPECTED_OUTPUT_TOKENS
        cost = cost_usd(
            self.model, len(prompt) // 4, round(min(output, self.spec.max_tokens)), self.prices
        )
        return cost or 0.0

    def call_cost(
        self, prompt: str, response: ModelResponse | None, *, batch: bool = False
    ) -> float:
        """What a call cost, for the budget: from the usage, else a bound on it (the prompt
        at ~4 characters a token and the whole output cap), so that an API that reports no
        usage cannot spend without limit; 0 for a failed call (errors are not billed).
        ``batch``: the call went through the provider's batch API, at its batch prices."""
        if response is None:
            return 0.0
        cost = self._cost(response, batch)
        if cost is None:
            cost = cost_usd(
                self.model,
                response.input_tokens if response.input_tokens is not None else len(prompt) // 4,
                response.output_tokens
                if response.output_tokens is not None
                else self.spec.max_tokens,
                self.prices,
                cache_write_tokens=response.cache_write_tokens,
                cache_read_tokens=response.cache_read_tokens,
                batch=batch,
            )
        return cost or 0.0

    def _cost(self, response: ModelResponse, batch: bool = False) -> float | None:
        return cost_usd(
            self.model,
            response.input_tokens,
            response.output_tokens,
            self.prices,
            cache_write_tokens=response.cache_write_tokens,
            cache_read_tokens=response.cache_read_tokens,
            batch=batch,
        )

    def prepare(self, item: Item) -> PreparedCall | Judgment:
        """The call that judges ``item``, or its unscored judgment when the prompt cannot
        be rendered (a variable missing): no call is made for it."""
        common: dict[str, object] = {
            "prompt_name": self.template.ref,
            "prompt_hash": self.template.sha256,
            "provider": self.spec.provider,
            "model": self.model,
            "verdict_threshold": self.verdict_threshold,
        }
        try:
            static, per_item = self.template.render_parts(item.variables)
        except PromptError as error:
            return self._unscored(item, f"missing variable: {error}", _CallTimer(), **common)
        prompt = static + per_item
        common["cache_key"] = self._cache_key(prompt)
        request = ModelRequest(
            prompt=per_item,
            output_kind=self.output_kind,
            model=self.model,
            temperature=self.spec.temperature,
            max_tokens=self.spec.max_tokens,
            timeout=self.spec.timeout,
            structured=self.spec.structured_output,
            static_prompt=static,
            prompt_cache_key=self.provider_cache_key,
        )
        return PreparedCall(item, request, prompt, common)

    def answered(
        self, call: PreparedCall, response: ModelResponse, *, batch_id: str | None = None
    ) -> Judgment:
        """The judgment of a response to ``call``: parsed, validated and anchored as a
        real-time answer is; ``batch_id``: it came from that batch, at batch prices. A
        response whose usage report is out of range is unscored, as a real-time call's is."""
        if response.usage_error is not None:
            reason = f"provider error: server: {response.usage_error}"
            return self.unanswered(call, reason, batch_id=batch_id)
        return self._judgment(call.item, response, 1, _CallTimer(), dict(call.common), batch_id)

    def unanswered(
        self, call: PreparedCall, reason: str, *, batch_id: str | None = None, attempts: int = 1
    ) -> Judgment:
        """The unscored judgment of ``call`` when no answer came (the provider's reason)."""
        extra = {**call.common, "batch_id": batch_id}
        return self._unscored(call.item, reason, _CallTimer(), attempts=attempts, **extra)

    async def judge(
        self,
        item: Item,
        breaker: CircuitBreaker | None = None,
        budget: Budget | None = None,
    ) -> Judgment:
        """Judge ``item``; with ``breaker``, a judge stopped for a bad key or model is not
        called, and this call's outcome counts towards stopping it. With ``budget``, raises
        :class:`BudgetReached` instead of calling once it is spent (no row: the item is left
        for ``--resume``)."""
        if budget is not None and budget.reached:
            raise BudgetReached("budget reached")  # before queueing for a slot
        timer = _CallTimer()
        call = self.prepare(item)
        if isinstance(call, Judgment):
            return call
        request, prompt, common = call.request, call.prompt, dict(call.common)
        attempts = 0

        async def attempt() -> ModelResponse:
            nonlocal attempts
            async with self.limiter.slot(estimate_tokens(prompt, request.max_tokens)) as slot:
                # Checked once a slot is free, not before queueing: calls queued behind the
                # failing ones must see the breaker the failures opened.
                if breaker is not None:
                    breaker.check()
                # Also in the slot: the spending of the calls that held it is known by now.
                estimate = self.call_estimate(prompt) if budget is not None else 0.0
                if budget is not None:
                    await budget.admit(estimate)
                attempts += 1
                answered: ModelResponse | None = None
                try:
                    with timer:
                        response = answered = await self.client.complete(request)
                except ProviderError as error:
                    if breaker is not None:
                        breaker.failed(error)
                    raise
                finally:
                    if budget is not None:
                        budget.finish(self.call_cost(prompt, answered), estimate)
                    if answered is not None and answered.output_tokens is not None:
                        self._outputs[0] += answered.output_tokens
                        self._outputs[1] += 1
                if breaker is not None:
                    breaker.succeeded()
                if response.input_tokens is not None and response.output_tokens is not None:
                    slot.settle(response.input_tokens + response.output_tokens)
                return response

        try:
            response, attempts = await call_with_retries(
                attempt,
                self.client.should_retry,
                self.spec.max_attempts,
                base_delay=self.base_delay,
                max_delay=self.max_delay,
            )
        except RetriesExhausted as exhausted:
            return self._provider_failure(
                item, exhausted.last_error, exhausted.attempts, timer, common
            )
        except ProviderError as error:
            return self._provider_failure(item, error, attempts, timer, common)
        except BudgetReached:
            raise  # not a judgment: the item is judged by --resume
        except JudgeStopped as stopped:
            # attempts may be 0: stored as 1 would claim a call that was never made.
            return self._unscored(item, str(stopped), timer, attempts=attempts, **common)
        except Exception as error:
            if self._closed:
                # The run closed this judge's client while the call was in flight: it is
                # stopping (a full disk, say), so the call is cut, not failed; no row, and
                # --resume judges the item.
                raise asyncio.CancelledError(f"{self.judge_id}: the run stopped") from error
            # The Judge contract: one broken call costs one row, never the whole chunk. The
            # traceback is kept for the bug report, cleaned like the row: it may quote a URL.
            log.error(
                "judge %s: unexpected failure on item %s\n%s",
                self.judge_id,
                item.item_id,
                redact_text(traceback.format_exc(), self._secrets),
            )
            return self._unscored(
                item,
                f"internal error: {type(error).__name__}: {error}",
                timer,
                attempts=max(attempts, 1),
                **common,
            )
        return self._judgment(item, response, attempts, timer, common)

    def _judgment(
        self,
        item: Item,
        response: ModelResponse,
        attempts: int,
        timer: _CallTimer,
        common: dict[str, object],
        batch_id: str | None = None,
    ) -> Judgment:
        raw = response.text if response.structured is None else json.dumps(response.structured)
        extra: dict[str, object] = {
            **common,
            "usage": self._usage(response, batch=batch_id is not None),
            "attempts": attempts,
            "batch_id": batch_id,
        }
        if len(raw) > self.max_answer_chars:
            # Checked before any other pass over the answer: none of them runs on it.
            limit = self.max_answer_chars
            reason = f"answer too long: {len(raw):,} characters (limit {limit:,})"
            return self._unscored(item, reason, timer, raw_output=self._clipped(raw), **extra)
        # A server that echoes the request's headers can do it in a 200 as well as in an error.
        extra["raw_output"] = redact_text(raw, self._secrets)
        answer: str | dict[str, object] = (
            response.structured if response.structured is not None else response.text
        )
        try:
            parsed = parse_output(answer, self.output_kind)
        except OutputParseError as error:
            return self._unscored(item, f"unparseable output: {error}", timer, **extra)

        if self.output_kind == "spans":
            span_text = item.text(self.template.span_variable or "")
            spans = anchor_spans(span_text, parsed.spans, self.spec.fuzzy_threshold)
            # The prompt's rule: hallucinated iff the judge flagged a span that is really in
            # the text. Unmatched strings are kept for inspection but cannot make the verdict.
            score: float | None = 1.0 if any(span.anchored for span in spans) else 0.0
        else:
            spans = ()
            score = parsed.score
            if score is None:
                return self._unscored(
                    item, "unparseable output: no score in the answer", timer, **extra
                )
        return Judgment(
            item_id=item.item_id,
            judge_id=self.judge_id,
            output_kind=self.output_kind,
            score=score,
            spans=spans,
            reasoning=redact_text(parsed.reasoning, self._secrets) if parsed.reasoning else None,
            latency_ms=_elapsed_ms(timer),
            **extra,  # type: ignore[arg-type]
        )

    def _usage(self, response: ModelResponse, batch: bool = False) -> Usage:
        return Usage(
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            cost_usd=self._cost(response, batch),
            cache_write_tokens=response.cache_write_tokens,
            cache_read_tokens=response.cache_read_tokens,
        )

    def _clipped(self, raw: str) -> str:
        """The first ``max_answer_chars`` characters of an over-long answer, redacted.

        Redacted as part of twice as much, then cut: a secret that runs across the cut is
        masked whole (a cut secret no longer looks like one), unless it is itself longer than
        the limit; the rest of the answer is never looked at.
        """
        limit = self.max_answer_chars
        return redact_text(raw[: 2 * limit], self._secrets)[:limit]

    def _provider_failure(
        self,
        item: Item,
        error: ProviderError,
        attempts: int,
        timer: _CallTimer,
        common: dict[str, object],
    ) -> Judgment:
        plural = "attempt" if attempts == 1 else "attempts"
        reason = f"provider error after {attempts} {plural}: {error.kind}: {error.message}"
        return self._unscored(item, reason, timer, attempts=attempts, **common)

    def _unscored(self, item: Item, reason: str, timer: _CallTimer, **extra: object) -> Judgment:
        return unscored(
            item.item_id,
            self.judge_id,
            self.output_kind,
            redact_text(reason, self._secrets),
            latency_ms=_elapsed_ms(timer),
            **extra,
        )


class _CallTimer:
    """Time spent inside model calls, summed over attempts.

    Waiting for a concurrency slot or a backoff sleep is the panel's doing, not the model's,
    so it is left out: latency_ms compares models, not queue lengths.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self._entered = 0.0

    def __enter__(self) -> None:
        self._entered = time.perf_counter()

    def __exit__(self, *_: object) -> None:
        self.seconds += time.perf_counter() - self._entered


def _elapsed_ms(timer: _CallTimer) -> float:
    return timer.seconds * 1000.0
