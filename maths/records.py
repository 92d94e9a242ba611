"""The records that flow through a panel: items in, judgments and consensus out.

Frozen slotted dataclasses rather than pydantic models: thousands of these are built per
chunk on the hot path, and they carry no user input that still needs validating (the
dataset loader and the output parser validate before constructing them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

OutputKind = Literal["score", "spans", "preference"]
"""What a judge returns: a 0-1 score, a list of flagged spans (whose score is 1 if any), or
a preference between two answers A and B (its score B's share of the win: 1 B better, 0.5
tie, 0 A better; see :mod:`juryflow.maths.pairwise`)."""

PREFERENCE_SCORES: dict[str, float] = {"A": 0.0, "tie": 0.5, "B": 1.0}
"""A preference's verdict as its score: answer B's share of the win."""

MatchKind = Literal[
    "exact", "repeat", "normalized", "fuzzy", "ambiguous", "unmatched", "detector", "recorded"
]
"""How a span was located in the judged text.

- ``exact``: the first occurrence of the judge's string, character for character;
- ``repeat``: the k-th repeat of a string in the judge's list, anchored to its k-th occurrence;
- ``normalized``: equal after folding whitespace, case, curly quotes and trailing punctuation;
- ``fuzzy``: best approximate match above the similarity threshold;
- ``ambiguous``: the string occurs at several places and nothing says which one the judge
  meant; anchored to the first for display, but it casts no vote in the consensus (a guess
  must not vote as if it were certain);
- ``unmatched``: not found; stored but left out of the consensus;
- ``detector``: produced with offsets by an offline detector, nothing to anchor;
- ``recorded``: imported with its offsets (``juryflow import``), nothing to anchor.
"""

VERDICT_THRESHOLD = 0.5
"""The default verdict threshold: a score at or above it is a 'hallucinated' verdict.

Prompts declare their own in ``prompts/catalog.yaml`` (the score prompt: 0.3, "one minor
unsupported elaboration"), and a panel can override it per judge. Span judges score 1.0
when they flagged at least one anchored span and 0.0 otherwise, so for them the verdict is
"flagged an anchored span" whatever the threshold in (0, 1].
"""


@dataclass(frozen=True, slots=True)
class GoldLabels:
    """Human labels carried with an item: response-level verdict and/or character spans."""

    hallucinated: bool | None
    spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Item:
    """One row of the dataset, with its columns already mapped to prompt variables."""

    item_id: str
    variables: dict[str, str]
    gold: GoldLabels | None = None
    row_number: int = 0
    metadata: dict[str, str] = field(default_factory=dict)

    def text(self, variable: str) -> str:
        return self.variables.get(variable, "")


@dataclass(frozen=True, slots=True)
class Span:
    """A flagged span of the judged text. Offsets are None when the span could not be anchored."""

    char_start: int | None
    char_end: int | None
    text: str
    match: MatchKind
    requested: str = ""
    similarity: float | None = None

    @property
    def anchored(self) -> bool:
        return self.char_start is not None and self.char_end is not None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int | None = None
    """Every prompt token the model read, those written to or read from the provider's
    prompt cache included (Anthropic reports them apart; they are summed here)."""
    output_tokens: int | None = None
    cost_usd: float | None = None
    cache_write_tokens: int | None = None
    """Of ``input_tokens``, those written to the provider's prompt cache (Anthropic reports
    them; OpenAI does not, and charges nothing extra for them)."""
    cache_read_tokens: int | None = None
    """Of ``input_tokens``, those served from the provider's prompt cache."""


@dataclass(frozen=True, slots=True)
class Judgment:
    """One judge's verdict on one item; unscored (score None) with a reason when it failed."""

    item_id: str
    judge_id: str
    output_kind: OutputKind
    score: float | None
    spans: tuple[Span, ...] = ()
    reasoning: str | None = None
    raw_output: str | None = None
    unscored_reason: str | None = None
    latency_ms: float = 0.0
    prompt_name: str | None = None
    prompt_hash: str | None = None
    provider: str = "offline"
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    cache_key: str | None = None
    cached: bool = False
    verdict_threshold: float = VERDICT_THRESHOLD
    """A score at or above this is a 'hallucinated' verdict (the prompt's, or the panel's)."""
    batch_id: str | None = None
    """The provider's batch this answer came from (``--batch``); None for a real-time call."""
    samples: tuple[Judgment, ...] = ()
    """A judge with ``samples: N > 1``: its N answers, in sample order, this judgment
    reduces (:mod:`juryflow.maths.samples`); empty for a judge asked once."""

    def __post_init__(self) -> None:
        if self.score is None and not self.unscored_reason:
            raise ValueError("an unscored judgment must say why (unscored_reason)")
        if self.score is not None and not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score!r} is outside [0, 1]")
        if not 0.0 < self.verdict_threshold <= 1.0:
            raise ValueError(f"verdict threshold {self.verdict_threshold!r} is outside (0, 1]")

    @property
    def scored(self) -> bool:
        return self.score is not None

    @property
    def verdict(self) -> bool | None:
        return None if self.score is None else self.score >= self.verdict_threshold

    @property
    def anchored_spans(self) -> tuple[Span, ...]:
        return tuple(s for s in self.spans if s.anchored)

    @property
    def voting_spans(self) -> tuple[Span, ...]:
        """Spans whose offsets are certain enough to vote: anchored and not ambiguous."""
        return tuple(s for s in self.spans if s.anchored and s.match != "ambiguous")


def unscored(
    item_id: str,
    judge_id: str,
    output_kind: OutputKind,
    reason: str,
    **extra: object,
) -> Judgment:
    """A judgment that carries no grade, only the reason it has none."""
    return Judgment(
        item_id=item_id,
        judge_id=judge_id,
        output_kind=output_kind,
        score=None,
        unscored_reason=reason,
        **extra,  # type: ignore[arg-type]
    )


ConsensusStatus = Literal["ok", "insufficient"]


@dataclass(frozen=True, slots=True)
class ConsensusSpan:
    char_start: int
    char_end: int
    text: str
    votes: int
    """The most judges that marked any character of the span."""
    min_votes: int
    """The fewest judges that marked any character of the span: a majority, or at least the
    ``min_votes`` a re-aggregation asked for."""


@dataclass(frozen=True, slots=True)
class Consensus:
    """The panel's combined answer for one item."""

    item_id: str
    status: ConsensusStatus
    n_judges: int
    n_answered: int
    n_scored: int
    score: float | None
    """The consensus score: the rule's score reducer (median by default)."""
    score_median: float | None
    score_min: float | None
    score_max: float | None
    score_spread: float | None
    hallucinated: bool | None
    n_span_judges: int = 0
    spans: tuple[ConsensusSpan, ...] = ()
    chars_any: int = 0
    """Characters of the text that at least one answering span judge marked."""
    chars_all: int = 0
    """Characters that every answering span judge marked (with chars_any: span agreement)."""
    verdict_rule: str | None = None
    """The verdict rule that decided ``hallucinated`` (``spans``, ``majority``, ...)."""
    unlocalised: bool = False
    """The judges agree something is wrong but no character won the span vote."""

    @property
    def contradicts(self) -> bool:
        """A clean verdict with consensus spans: the rule let the two disagree."""
        return self.hallucinated is False and bool(self.spans)
