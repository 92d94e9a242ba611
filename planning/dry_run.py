"""What a run would cost, before it runs: the ``--dry-run`` estimate and the ``--max-cost``
checks.

Nothing here calls a model, starts Prefect or writes anything: the dataset is read and every
(item, judge) prompt rendered exactly as the run would, and the store, when it exists, is
only read (its judgment cache and the output sizes of earlier calls). API keys are not
needed: a missing one is reported as a note, since the run itself would refuse to start.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from juryflow.judges.budget import EXPECTED_OUTPUT_TOKENS, check_enforceable
from juryflow.judges.llm_judge import prompt_cache_key
from juryflow.judges.panel import JudgeSpec, PanelSpec
from juryflow.judges.pricing import cached_prefix_tokens, price_for
from juryflow.judges.providers.price import Price
from juryflow.judges.providers.registry import registered_provider
from juryflow.judges.sampling.keys import sample_cache_key
from juryflow.maths.records import Item
from juryflow.planning.run_request import RunRequest
from juryflow.planning.run_setup import RunPlan, RunSetupError, checked_inputs, requested_panel
from juryflow.prompts.loader import PromptError, PromptTemplate
from juryflow.storage.datasets import (
    RowError,
    read_items,
    select_items,
)
from juryflow.storage.reads.run_queries import cached_keys, typical_output_tokens
from juryflow.storage.store import Store

CHARS_PER_TOKEN = 4
"""No tokenizer is loaded (none ships with juryflow, and fetching one needs the network):
English prose runs at about four characters a token for the GPT and Claude tokenizers,
the same figure the rate limiter reserves by."""

DEFAULT_OUTPUT_TOKENS = EXPECTED_OUTPUT_TOKENS
"""Output tokens per call when the store has no earlier call of the judge's model and
prompt: the guess ``--max-cost`` reserves for a judge's first calls too."""

INPUT_METHOD = (
    "input tokens: characters of each rendered prompt / 4 (an estimate, no tokenizer); "
    "the tool or JSON-schema definition sent with a structured call is not counted"
)

_LOOKUP_BATCH = 2000


@dataclass(slots=True)
class JudgeEstimate:
    judge_id: str
    model: str | None
    """None for an offline detector (no model call, no cost)."""
    price: Price | None = None
    calls: int = 0
    """Model calls the run would make (retries not counted)."""
    cached: int = 0
    """Answers the run would take from the store's judgment cache instead of calling."""
    no_call: int = 0
    """Items whose prompt cannot be rendered: unscored without a call."""
    input_tokens: int = 0
    output_tokens_each: float = 0.0
    output_basis: str = ""
    max_tokens: int = 0
    batch: bool = False
    """The calls go through the provider's batch API: priced at its batch prices."""
    cache_prefix_tokens: int = 0
    """Tokens of the static prompt part the provider's cache keeps (0: none assumed):
    written once by the first call, read by every later one (see :func:`_cache_note`)."""

    @property
    def cache_tokens(self) -> tuple[int, int]:
        """(written, read): of ``input_tokens``, those priced at the prompt cache's prices."""
        if not self.cache_prefix_tokens or not self.calls:
            return 0, 0
        return self.cache_prefix_tokens, self.cache_prefix_tokens * (self.calls - 1)

    @property
    def output_tokens(self) -> int:
        return round(self.calls * self.output_tokens_each)

    @property
    def output_tokens_max(self) -> int:
        return self.calls * self.max_tokens

    def cost(self, output_tokens: int) -> float | None:
        if self.model is None:
            return 0.0
        if self.price is None:
            return None
        price, batch = self.price, self.batch
        written, read = self.cache_tokens
        return (
            (self.input_tokens - written - read) * price.input_price(batch)
            + written * price.cache_write_price(batch)
            + read * price.cache_read_price(batch)
            + output_tokens * price.output_price(batch)
        ) / 1e6

    @property
    def cost_usd(self) -> float | None:
        return self.cost(self.output_tokens)

    @property
    def cost_max_usd(self) -> float | None:
        return self.cost(self.output_tokens_max)


@dataclass(slots=True)
class DryRun:
    """What a run would call and cost, judge by judge (``juryflow run --dry-run``)."""

    dataset: Path
    panel_name: str
    judges: list[JudgeEstimate]
    items: int = 0
    rejected_rows: int = 0
    cache_used: bool = False
    """Whether the store's cache was consulted (it exists and --no-cache was not given)."""
    notes: list[str] = field(default_factory=list)
    max_cost: float | None = None

    def table(self) -> pa.Table:
        """One row per judge, as the CLI prints it; costs in US dollars, None unpriced."""
        return pa.Table.from_pylist(
            [
                {
                    "judge_id": j.judge_id,
                    "model": j.model,
                    "calls": j.calls,
                    "cached": j.cached,
                    "input_tokens": j.input_tokens,
                    "output_tokens_est": j.output_tokens,
                    "cost_usd_est": j.cost_usd,
                    "cost_usd_max": j.cost_max_usd,
                    "batch": j.batch,
                }
                for j in self.judges
            ]
        )

    def total(self, attribute: str) -> float | None:
        values = [getattr(j, attribute) for j in self.judges]
        return None if any(v is None for v in values) else sum(values)


def _llm_judges(panel: PanelSpec) -> list[tuple[JudgeSpec, PromptTemplate]]:
    return [
        (spec, spec.template())
        for spec in panel.judges
        if spec.provider != "offline" and spec.prompt is not None
    ]


def _key_note(spec: JudgeSpec) -> str | None:
    """Whether the run would find the judge's key, without asking Prefect for a Secret."""
    from juryflow.judges.keys import resolve_api_key
    from juryflow.judges.providers.base import MissingKeyError

    if spec.api_key_secret is not None:
        return None  # a Prefect Secret block: looking needs the Prefect server
    try:
        resolve_api_key(spec)
    except MissingKeyError:
        return f"judge {spec.id!r}: {spec.key_env} is not set; the run would refuse to start"
    except RuntimeError as error:  # masked credentials in a stored panel
        return str(error)
    return None


def _batch_note(estimate: JudgeEstimate) -> str:
    """Says that ``estimate`` is at batch prices, and which."""
    price = estimate.price
    prices = (
        f" (${price.input_price(True):g} in, ${price.output_price(True):g} out per million tokens)"
        if price is not None
        else ""
    )
    return (
        f"batch: {estimate.judge_id}'s calls go through its provider's batch API, costed at "
        f"batch prices{prices}; a server without one is called in real time at full price"
    )


def _cache_note(estimate: JudgeEstimate, spec: JudgeSpec, template: PromptTemplate) -> str | None:
    """How ``estimate`` prices the static part of its prompt (the text above the
    ``{{-- per item --}}`` line), sets what its cost assumes, and says that assumption."""
    prefix = len(template.static_text) // CHARS_PER_TOKEN
    if not prefix:
        return None  # all per item: nothing is cached
    head = f"prompt cache: {estimate.judge_id}'s static prompt part (~{prefix:,} tokens)"
    full = "the full batch input rate" if estimate.batch else "the full input rate"
    kept = cached_prefix_tokens(spec.provider, spec.model or "", spec.base_url, prefix)
    if kept is None:
        return (
            f"{head} is priced at {full}: an OpenAI-compatible server (base_url) "
            "caches prompts, if at all, by rules of its own"
        )
    if not kept:
        return f"{head} is under the provider's minimum for its cache: priced at {full}"
    estimate.cache_prefix_tokens = kept
    how = registered_provider(spec.provider).cache_mechanism
    # A batch's requests meet the cache on a best-effort basis: the same assumption, said.
    batch = " (in a batch, at batch prices, the cache is best effort: it may cost more)"
    return (
        f"{head} is priced as one cache write of {kept:,} tokens and a cache read by each "
        f"later call ({how}): this assumes the judge's calls follow each other within the "
        "cache's lifetime (5 minutes, renewed by each read); a pause longer than that "
        f"writes it again{batch if estimate.batch else ''}"
    )


def _selected(dataset: Path, plan: RunPlan, max_chars: int) -> Iterator[Item | RowError]:
    return select_items(
        read_items(dataset, plan.needed_variables, plan.mapping, max_chars),
        plan.limit,
        plan.sample,
        plan.seed,
    )


def estimate_run(request: RunRequest) -> DryRun:
    """The calls, tokens and cost per judge of the run ``request`` would start (its
    ``batch`` over the panel's setting)."""
    if request.resume is not None:
        raise RunSetupError(
            "--dry-run estimates a new run; drop --resume (a resumed run judges only the "
            "(item, judge) pairs it has not stored)"
        )
    panel_spec = requested_panel(request)
    max_cost, use_cache, max_chars = request.max_cost, request.use_cache, request.max_chars
    if max_cost is not None:
        check_enforceable(panel_spec, max_cost, distributed=False)
    # The run's own checks (span texts included), so the dry run refuses what it would.
    dataset_path = checked_inputs(panel_spec, request)
    store = Store(request.db)
    plan = RunPlan(
        run_id="",
        store=store,
        panel=panel_spec,
        dataset=dataset_path,
        mapping=dict(request.mapping),
        quorum=panel_spec.effective_quorum,
        chunk_size=1,
        max_chars=max_chars,
        use_cache=use_cache,
        resumed=False,
        limit=request.limit,
        sample=request.sample,
        seed=request.seed,
    )
    # Only read: a dry run never creates the store it would write to.
    existing = store if store.exists() else None
    result = DryRun(
        dataset_path,
        panel_spec.name,
        [JudgeEstimate(spec.id, spec.model) for spec in panel_spec.judges],
        cache_used=use_cache and existing is not None,
        max_cost=max_cost,
    )
    by_id = {estimate.judge_id: estimate for estimate in result.judges}
    judges = _llm_judges(panel_spec)
    for spec, template in judges:
        by_id[spec.id].price = price_for(spec.model or "", panel_spec.prices)
        by_id[spec.id].max_tokens = spec.max_tokens
        by_id[spec.id].batch = panel_spec.uses_batch(spec)
        if by_id[spec.id].batch:
            result.notes.append(_batch_note(by_id[spec.id]))
        cache_note = _cache_note(by_id[spec.id], spec, template)
        if cache_note:
            result.notes.append(cache_note)
        note = _key_note(spec)
        if note:
            result.notes.append(note)
    _output_sizes(result, judges, existing)

    pending: list[tuple[str, str, int]] = []  # (judge id, cache key, input tokens)
    for row in _selected(dataset_path, plan, max_chars):
        if not isinstance(row, Item):
            result.rejected_rows += 1
            continue
        result.items += 1
        for spec, template in judges:
            try:
                prompt = template.render(row.variables)
            except PromptError:
                by_id[spec.id].no_call += 1
                continue
            tokens = len(prompt) // CHARS_PER_TOKEN
            base = prompt_cache_key(spec, prompt)
            # A sampled judge makes a call per sample (sample 0 under the unsampled key).
            pending += [(spec.id, sample_cache_key(base, k), tokens) for k in range(spec.samples)]
        if len(pending) >= _LOOKUP_BATCH:
            _settle(pending, by_id, existing if result.cache_used else None)
            pending = []
    _settle(pending, by_id, existing if result.cache_used else None)
    return result


def _settle(
    pending: list[tuple[str, str, int]],
    by_id: dict[str, JudgeEstimate],
    store: Store | None,
) -> None:
    """Count the rendered prompts as calls, or as cache hits when the store has the answer."""
    hits = cached_keys(store, [key for _, key, _ in pending]) if store is not None else set()
    for judge_id, key, tokens in pending:
        estimate = by_id[judge_id]
        if key in hits:
            estimate.cached += 1
        else:
            estimate.calls += 1
            estimate.input_tokens += tokens


def _output_sizes(
    result: DryRun, judges: list[tuple[JudgeSpec, PromptTemplate]], store: Store | None
) -> None:
    """Output tokens per call: the mean of the store's earlier calls of the same model and
    prompt, else :data:`DEFAULT_OUTPUT_TOKENS` (capped by ``max_tokens``)."""
    pairs = [(spec.model or "", template.sha256) for spec, template in judges]
    seen = typical_output_tokens(store, pairs) if store is not None else {}
    for (spec, _), pair in zip(judges, pairs, strict=True):
        estimate = next(e for e in result.judges if e.judge_id == spec.id)
        if pair in seen:
            mean, count = seen[pair]
            estimate.output_tokens_each = min(mean, spec.max_tokens)
            estimate.output_basis = f"mean of {count} earlier calls in the store"
        else:
            estimate.output_tokens_each = min(DEFAULT_OUTPUT_TOKENS, spec.max_tokens)
            estimate.output_basis = f"a guess of {DEFAULT_OUTPUT_TOKENS} per call"
