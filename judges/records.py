"""The records that flow through a panel: items in, judgments and consensus out.

Frozen slotted dataclasses rather than pydantic models: thousands of these are built per
chunk on the hot path, and they carry no user input that still needs validating (the
dataset loader and the output parser validate before constructing them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

OutputKind = Literal["score", "spans"]
"""What a judge returns: a 0-1 score, or a list of flagged spans (whose score is 1 if any)."""

MatchKind = Literal["exact", "repeat", "normalized", "fuzzy", "unmatched", "detector"]
"""How a span was located in the judged text.

- ``exact``: the first occurrence of the judge's string, character for character;
- ``repeat``: the k-th repeat of a string in the judge's list, anchored to its k-th occurrence;
- ``normalized``: equal after folding whitespace, case, curly quotes and trailing punctuation;
- ``fuzzy``: best approximate match above the similarity threshold;
- ``unmatched``: not found; stored but left out of the consensus;
- ``detector``: produced with offsets by an offline detector, nothing to anchor.
"""

VERDICT_THRESHOLD = 0.5
"""A score strictly above this is a 'hallucinated' verdict.

Strict, so that for span-only judges (score 0 or 1) an even split is not a majority, the
same rule the character-vote consensus uses.
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
    output_tokens: int | None = None
    cost_usd: float | None = None


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

    def __post_init__(self) -> None:
        if self.score is None and not self.unscored_reason:
            raise ValueError("an unscored judgment must say why (unscored_reason)")
        if self.score is not None and not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score!r} is outside [0, 1]")

    @property
    def scored(self) -> bool:
        return self.score is not None

    @property
    def verdict(self) -> bool | None:
        return None if self.score is None else self.score > VERDICT_THRESHOLD

    @property
    def anchored_spans(self) -> tuple[Span, ...]:
        return tuple(s for s in self.spans if s.anchored)


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
