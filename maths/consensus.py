"""Combine a panel's judgments on one item under a named :class:`ConsensusRule`.

Pure functions over the records of :mod:`juryflow.maths.records`; no I/O. The rules themselves
(median, majority, union, Dawid–Skene, ...) live in :mod:`juryflow.maths.reducers`; this module
applies them to one item. The contract:

- only *scored* judgments count: a failed or unparseable judge (score None) neither answers
  nor votes;
- the consensus score is the rule's score reducer over the scored judges (default: median);
- characters are marked by the rule's span reducer over the answering span judges (default:
  a strict majority of them); score-only judges have no say on spans, unanchored spans have
  no offsets to vote with, and ambiguous anchors (a string found at several places) are a
  guess, so they do not vote either;
- runs of marked characters are snapped outwards to word boundaries, so a consensus span
  never starts or ends inside a word;
- the verdict is the rule's verdict rule: by default, for a panel of span judges,
  "hallucinated iff the consensus has a span" (so verdict and spans never contradict), with
  ``unlocalised`` set when a majority of the judges said hallucinated but no character won;
  for other panels a strict majority of the judges' own verdicts (a tie is clean);
- below the quorum (default: a majority of the panel) there is no consensus at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from juryflow.maths.records import Consensus, ConsensusSpan, Judgment
from juryflow.maths.reducers import (
    DEFAULT_RULE,
    Ballot,
    ConsensusRule,
    RuleRef,
    decide_verdict,
    reduce_score,
    reduce_spans,
)

Run = tuple[int, int]
"""A half-open character range ``[start, end)``."""


def default_quorum(n_judges: int) -> int:
    """A majority of the panel, the same rule as ``PanelSpec.effective_quorum``.

    >>> [default_quorum(n) for n in (1, 2, 3, 4, 5)]
    [1, 2, 2, 3, 3]
    """
    return n_judges // 2 + 1


def resolve_quorum(n_judges: int, quorum: int | None) -> int:
    """The quorum to apply, after checking it fits the panel.

    >>> resolve_quorum(4, None)
    3
    >>> resolve_quorum(4, 1)
    1
    >>> resolve_quorum(4, 5)
    Traceback (most recent call last):
    ...
    ValueError: quorum 5 does not fit a panel of 4 judges: it must be between 1 and 4
    """
    if n_judges < 1:
        raise ValueError(f"a panel needs at least one judge, got n_judges={n_judges}")
    if quorum is None:
        return default_quorum(n_judges)
    if not 1 <= quorum <= n_judges:
        raise ValueError(
            f"quorum {quorum} does not fit a panel of {n_judges} judges: "
            f"it must be between 1 and {n_judges}"
        )
    return quorum


def coverage(spans_per_judge: Sequence[Sequence[Run]], length: int) -> np.ndarray:
    """Which characters each judge marks: a bool matrix ``(n_judges, length)``.

    Offsets are clipped to ``[0, length]`` (a judge cannot vote outside the text) and empty
    spans are ignored; overlapping spans of one judge still mark a character once.

    >>> coverage([[(0, 3)], [(2, 5), (1, 4)]], 6).astype(int).tolist()
    [[1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 1, 0]]
    """
    length = max(int(length), 0)
    n_voters = len(spans_per_judge)
    owners: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for judge, spans in enumerate(spans_per_judge):
        for start, end in spans:
            owners.append(judge)
            starts.append(start)
            ends.append(end)
    if not owners or length == 0:
        return np.zeros((n_voters, length), dtype=bool)
    owner = np.asarray(owners, dtype=np.int64)
    start_at = np.clip(np.asarray(starts, dtype=np.int64), 0, length)
    end_at = np.clip(np.asarray(ends, dtype=np.int64), 0, length)
    keep = start_at < end_at
    owner, start_at, end_at = owner[keep], start_at[keep], end_at[keep]
    # One difference row per judge: its cumulative sum is how many of that judge's spans
    # cover each character, and "> 0" makes overlapping spans count once.
    diff = np.zeros((n_voters, length + 1), dtype=np.int64)
    np.add.at(diff, (owner, start_at), 1)
    np.add.at(diff, (owner, end_at), -1)
    return np.asarray(np.cumsum(diff[:, :length], axis=1) > 0)


def character_votes(spans_per_judge: Sequence[Sequence[Run]], length: int) -> np.ndarray:
    """How many judges mark each character of a text of ``length`` characters.

    >>> character_votes([[(0, 3)], [(2, 5), (1, 4)]], 6).tolist()
    [1, 2, 2, 1, 1, 0]
    >>> character_votes([[(-2, 2), (4, 99)]], 5).tolist()
    [1, 1, 0, 0, 1]
    >>> character_votes([], 3).tolist()
    [0, 0, 0]
    """
    return coverage(spans_per_judge, length).sum(axis=0, dtype=np.int64)


def majority_runs(votes: np.ndarray, n_voters: int, min_votes: int | None = None) -> list[Run]:
    """Maximal runs of characters marked by strictly more than half of ``n_voters``.

    With ``min_votes``, a character needs at least that many votes instead of a strict
    majority (``juryflow reaggregate --min-votes``).

    >>> import numpy as np
    >>> majority_runs(np.array([0, 2, 2, 1, 3, 0]), 3)
    [(1, 3), (4, 5)]
    >>> majority_runs(np.array([1, 1, 0]), 2)  # an even split is not a majority
    []
    >>> majority_runs(np.array([1, 1]), 0)
    []
    >>> majority_runs(np.array([1, 1, 0, 2]), 3, min_votes=1)
    [(0, 2), (3, 4)]
    """
    if n_voters <= 0:
        return []
    return flagged_runs(_flagged(votes, n_voters, min_votes))


def flagged_runs(flagged: np.ndarray) -> list[Run]:
    """Maximal runs of True in a bool vector.

    >>> import numpy as np
    >>> flagged_runs(np.array([False, True, True, False, True]))
    [(1, 3), (4, 5)]
    """
    # Padding with False on both sides makes every run open with +1 and close with -1.
    edges = np.diff(np.concatenate(([False], flagged, [False])).astype(np.int8))
    run_starts = np.flatnonzero(edges == 1)
    run_ends = np.flatnonzero(edges == -1)
    return [(int(s), int(e)) for s, e in zip(run_starts, run_ends, strict=True)]


def _flagged(votes: np.ndarray, n_voters: int, min_votes: int | None) -> np.ndarray:
    """Which characters enter the consensus: a strict majority, or ``>= min_votes``."""
    counts = np.asarray(votes, dtype=np.int64)
    if min_votes is None:
        return counts * 2 > n_voters
    if min_votes < 1:
        raise ValueError(f"min_votes must be at least 1, got {min_votes}")
    return counts >= min_votes


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def snap_run(run: Run, text: str) -> Run:
    """Widen ``run`` so that it neither starts nor ends inside a word of ``text``.

    >>> snap_run((5, 7), "the hallucinated year")
    (4, 16)
    >>> snap_run((3, 8), "the hallucinated year")  # starts on a space: nothing to widen
    (3, 16)
    >>> snap_run((0, 3), "the hallucinated year")
    (0, 3)
    """
    start, end = run
    while 0 < start < len(text) and _is_word_char(text[start - 1]) and _is_word_char(text[start]):
        start -= 1
    while 0 < end < len(text) and _is_word_char(text[end - 1]) and _is_word_char(text[end]):
        end += 1
    return start, end


def merge_runs(runs: Iterable[Run]) -> list[Run]:
    """Sorted, non-empty runs with any that overlap or touch joined into one.

    >>> merge_runs([(6, 8), (0, 2), (2, 4), (7, 9), (5, 5)])
    [(0, 4), (6, 9)]
    """
    merged: list[Run] = []
    for start, end in sorted(r for r in runs if r[0] < r[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def snap_to_words(runs: Iterable[Run], text: str) -> list[Run]:
    """Snap every run to word boundaries, then merge those that came to touch or overlap.

    >>> snap_to_words([(1, 2), (4, 5)], "foobar baz")
    [(0, 6)]
    >>> snap_to_words([(1, 2), (8, 9)], "foobar baz")
    [(0, 6), (7, 10)]
    >>> snap_to_words([(2, 2)], "foobar baz")  # an empty run marks nothing to widen
    []
    """
    # Empty runs are dropped first: snapped, one inside a word would grow into the word.
    return merge_runs(snap_run(run, text) for run in runs if run[0] < run[1])


def consensus_spans(
    votes: np.ndarray, n_voters: int, text: str, min_votes: int | None = None
) -> tuple[ConsensusSpan, ...]:
    """The panel's spans by character majority (or ``>= min_votes``), snapped to words.

    >>> import numpy as np
    >>> [(s.text, s.votes, s.min_votes) for s in consensus_spans(
    ...     np.array([0, 0, 0, 0, 2, 3, 0, 0, 0]), 3, "in 1889 ")]
    [('1889', 3, 2)]
    """
    return spans_from_flags(_flagged(votes, n_voters, min_votes), votes, text)


def spans_from_flags(
    flagged: np.ndarray, votes: np.ndarray, text: str
) -> tuple[ConsensusSpan, ...]:
    """Runs of ``flagged`` characters, snapped to words and merged, with their vote counts.

    >>> import numpy as np
    >>> [(s.text, s.votes) for s in spans_from_flags(
    ...     np.array([0, 0, 0, 1, 1, 0], bool), np.array([0, 0, 0, 1, 2, 0]), "a bcd ")]
    [('bcd', 2)]
    """
    spans: list[ConsensusSpan] = []
    for start, end in snap_to_words(flagged_runs(flagged), text):
        # The counts come from the flagged characters only: the word-snapped margins were
        # not voted in and would drag min_votes below what the rule asked for.
        inside = votes[start:end][flagged[start:end]]
        spans.append(
            ConsensusSpan(
                char_start=start,
                char_end=end,
                text=text[start:end],
                votes=int(inside.max()),
                min_votes=int(inside.min()),
            )
        )
    return tuple(spans)


def _offsets(judgment: Judgment) -> list[Run]:
    """Offsets of the spans that vote: anchored, and not an ambiguous guess."""
    return [
        (span.char_start, span.char_end)
        for span in judgment.voting_spans
        if span.char_start is not None and span.char_end is not None
    ]


def _check_judgments(item_id: str, judgments: Sequence[Judgment], n_judges: int) -> None:
    seen: set[str] = set()
    for judgment in judgments:
        if judgment.item_id != item_id:
            raise ValueError(
                f"item {item_id!r}: judgment by {judgment.judge_id!r} is for item "
                f"{judgment.item_id!r}"
            )
        if judgment.judge_id in seen:
            raise ValueError(
                f"item {item_id!r}: judge {judgment.judge_id!r} has more than one judgment; "
                "each judge gets one vote per item"
            )
        seen.add(judgment.judge_id)
    if len(seen) > n_judges:
        raise ValueError(
            f"item {item_id!r}: {len(seen)} judges answered but the panel has only {n_judges}"
        )


def _rule_for(
    rule: ConsensusRule, judgments: Sequence[Judgment], min_votes: int | None
) -> ConsensusRule:
    if min_votes is not None:
        if min_votes < 1:
            raise ValueError(f"min_votes must be at least 1, got {min_votes}")
        rule = replace(rule, spans=RuleRef("spans", "at_least", float(min_votes)))
    # Callers resolve "auto" against the whole panel; an item alone decides by the judges
    # that answered it (an unscored judgment has no say, not even on the rule).
    scored = [j for j in judgments if j.score is not None]
    return rule.resolve(bool(scored) and all(j.output_kind == "spans" for j in scored))


def item_consensus(
    item_id: str,
    judgments: Sequence[Judgment],
    n_judges: int,
    text: str,
    quorum: int | None = None,
    min_votes: int | None = None,
    rule: ConsensusRule = DEFAULT_RULE,
) -> Consensus:
    """Combine one item's judgments into the panel's consensus under ``rule``.

    ``n_judges`` is the size of the panel (judges that failed or never ran included) and
    sets the default quorum; ``text`` is the judged text the span offsets refer to.
    ``min_votes`` overrides the span rule with ``at_least:min_votes``.

    >>> from juryflow.maths.records import Judgment
    >>> votes = [Judgment("i1", j, "score", s) for j, s in (("a", 0.2), ("b", 0.6), ("c", 0.9))]
    >>> c = item_consensus("i1", votes, n_judges=3, text="")
    >>> c.status, c.score, c.hallucinated, c.verdict_rule
    ('ok', 0.6, True, 'majority')
    >>> item_consensus("i1", votes[:1], n_judges=3, text="").status
    'insufficient'
    """
    needed = resolve_quorum(n_judges, quorum)
    _check_judgments(item_id, judgments, n_judges)
    rule = _rule_for(rule, judgments, min_votes)
    scored = [j for j in judgments if j.score is not None]
    span_judges = [j for j in scored if j.output_kind == "spans"]
    n_answered = len(scored)
    covered = coverage([_offsets(j) for j in span_judges], len(text))
    votes = covered.sum(axis=0, dtype=np.int64)
    # How far the span judges agree is worth knowing even when no consensus is published.
    chars_any = int(np.count_nonzero(votes))
    chars_all = int(np.count_nonzero(votes == len(span_judges))) if span_judges else 0
    common = dict(
        item_id=item_id,
        n_judges=n_judges,
        n_answered=n_answered,
        n_scored=n_answered,
        n_span_judges=len(span_judges),
        chars_any=chars_any,
        chars_all=chars_all,
        verdict_rule=str(rule.verdict),
    )
    if n_answered < needed:
        return Consensus(
            status="insufficient",
            score=None,
            score_median=None,
            score_min=None,
            score_max=None,
            score_spread=None,
            hallucinated=None,
            **common,  # type: ignore[arg-type]
        )
    judge_ids = tuple(j.judge_id for j in scored)
    weights = rule.weight_vector(judge_ids)
    scores = np.asarray([j.score for j in scored], dtype=np.float64)
    spans: tuple[ConsensusSpan, ...] = ()
    if span_judges:
        span_ids = [j.judge_id for j in span_judges]
        flagged = reduce_spans(rule, covered, rule.span_weight_vector(span_ids), span_ids)
        spans = spans_from_flags(flagged, votes, text)
    verdicts = np.asarray([bool(j.verdict) for j in scored], dtype=bool)
    score = reduce_score(rule, scores, weights, judge_ids)
    ballot = Ballot(
        judge_ids, verdicts, weights, score, bool(spans), rule.verdict_fit, scores, rule.stack
    )
    hallucinated = decide_verdict(rule, ballot)
    # Judges agree something is wrong but not where: said apart, never turned into a span.
    majority_says = bool(verdicts.sum() * 2 > verdicts.size)
    unlocalised = bool(span_judges) and not spans and (hallucinated or majority_says)
    return Consensus(
        status="ok",
        score=score,
        score_median=float(np.median(scores)),
        score_min=float(scores.min()),
        score_max=float(scores.max()),
        score_spread=float(scores.max() - scores.min()),
        hallucinated=hallucinated,
        spans=spans,
        unlocalised=unlocalised,
        **common,  # type: ignore[arg-type]
    )


def panel_consensus(
    judgments_by_item: Mapping[str, Sequence[Judgment]],
    texts: Mapping[str, str],
    n_judges: int,
    quorum: int | None = None,
    rule: ConsensusRule = DEFAULT_RULE,
) -> list[Consensus]:
    """The consensus of every item, in the order of ``judgments_by_item``.

    >>> from juryflow.maths.records import Judgment
    >>> by_item = {"i1": [Judgment("i1", "a", "score", 1.0)], "i2": []}
    >>> [(c.item_id, c.status) for c in panel_consensus(by_item, {"i1": "", "i2": ""}, 1)]
    [('i1', 'ok'), ('i2', 'insufficient')]
    """
    resolve_quorum(n_judges, quorum)
    missing = [item_id for item_id in judgments_by_item if item_id not in texts]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5])
        raise ValueError(f"no judged text for {len(missing)} item(s): {shown}")
    return [
        item_consensus(item_id, judgments, n_judges, texts[item_id], quorum, rule=rule)
        for item_id, judgments in judgments_by_item.items()
    ]
