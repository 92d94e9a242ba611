"""Consensus: median scores, character-vote spans, word snapping and the quorum."""

from __future__ import annotations

import doctest
import itertools
import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import juryflow.maths.consensus
from juryflow.maths.consensus import (
    character_votes,
    item_consensus,
    majority_runs,
    panel_consensus,
    snap_to_words,
)
from juryflow.maths.records import Consensus, Judgment, Span, unscored

ITEM = "item-1"


def span_at(start: int | None, end: int | None, text: str = "") -> Span:
    if start is None or end is None:
        return Span(None, None, "unfound", "unmatched")
    return Span(start, end, text[start:end], "exact")


def span_judge(judge_id: str, offsets: Sequence[tuple[int, int]], text: str = "") -> Judgment:
    """A span-only judge: score 1 when it flags anything, as the parser would build it."""
    spans = tuple(span_at(s, e, text) for s, e in offsets)
    return Judgment(ITEM, judge_id, "spans", 1.0 if spans else 0.0, spans=spans)


def score_judge(judge_id: str, score: float, spans: tuple[Span, ...] = ()) -> Judgment:
    return Judgment(ITEM, judge_id, "score", score, spans=spans)


def failed(judge_id: str, kind: str = "score") -> Judgment:
    return unscored(ITEM, judge_id, kind, "unparseable output")  # type: ignore[arg-type]


def ranges(consensus: Consensus) -> list[tuple[int, int]]:
    return [(s.char_start, s.char_end) for s in consensus.spans]


def chars(runs: Sequence[tuple[int, int]]) -> set[int]:
    return {i for start, end in runs for i in range(start, end)}


# --- worked examples: scores -------------------------------------------------------------


def test_odd_panel_median_spread_and_verdict() -> None:
    judgments = [score_judge("a", 0.2), score_judge("b", 0.6), score_judge("c", 0.9)]
    c = item_consensus(ITEM, judgments, n_judges=3, text="")
    assert c.status == "ok"
    assert (c.n_judges, c.n_answered, c.n_scored) == (3, 3, 3)
    assert c.score_median == pytest.approx(0.6)
    assert (c.score_min, c.score_max) == (0.2, 0.9)
    assert c.score_spread == pytest.approx(0.7)
    assert c.hallucinated is True
    assert c.n_span_judges == 0
    assert c.spans == ()


def test_even_panel_median_is_mean_of_middle_two() -> None:
    judgments = [score_judge(j, s) for j, s in zip("abcd", (0.0, 0.3, 0.6, 1.0), strict=True)]
    c = item_consensus(ITEM, judgments, n_judges=4, text="")
    assert c.score_median == pytest.approx(0.45)
    assert c.score_spread == pytest.approx(1.0)
    assert c.hallucinated is False


def test_tie_between_two_span_judges_is_not_a_majority() -> None:
    text = "Paris is in Germany."
    judgments = [span_judge("a", [(12, 19)], text), span_judge("b", [], text)]
    c = item_consensus(ITEM, judgments, n_judges=2, text=text)
    assert c.score_median == 0.5
    assert c.hallucinated is False
    assert c.n_span_judges == 2
    assert c.spans == ()


def test_failed_judge_is_skipped() -> None:
    judgments = [score_judge("a", 0.1), failed("b"), score_judge("c", 0.7)]
    c = item_consensus(ITEM, judgments, n_judges=3, text="")
    assert c.status == "ok"
    assert (c.n_answered, c.n_scored) == (2, 2)
    assert c.score_median == pytest.approx(0.4)
    assert (c.score_min, c.score_max) == (0.1, 0.7)
    assert c.hallucinated is False


def test_quorum_not_met_is_insufficient() -> None:
    judgments = [score_judge("a", 0.9), failed("b"), failed("c")]
    c = item_consensus(ITEM, judgments, n_judges=3, text="")
    assert c.status == "insufficient"
    assert (c.n_judges, c.n_answered) == (3, 1)
    assert c.score_median is None
    assert c.score_min is None and c.score_max is None and c.score_spread is None
    assert c.hallucinated is None
    assert c.spans == ()


@pytest.mark.parametrize(
    ("n_judges", "n_answered", "status"),
    [
        (1, 1, "ok"),
        (2, 1, "insufficient"),  # 2 // 2 + 1 = 2
        (3, 2, "ok"),
        (4, 2, "insufficient"),  # 4 // 2 + 1 = 3
        (4, 3, "ok"),
        (5, 2, "insufficient"),
        (5, 3, "ok"),
    ],
)
def test_default_quorum_is_majority_of_panel(n_judges: int, n_answered: int, status: str) -> None:
    # Judges that never ran are simply absent: the panel size, not the list, sets the quorum.
    judgments = [score_judge(f"j{i}", 0.5) for i in range(n_answered)]
    assert item_consensus(ITEM, judgments, n_judges=n_judges, text="").status == status


def test_explicit_quorum() -> None:
    judgments = [score_judge("a", 0.8), failed("b"), failed("c"), failed("d")]
    assert item_consensus(ITEM, judgments, 4, "", quorum=1).status == "ok"
    assert item_consensus(ITEM, judgments, 4, "", quorum=2).status == "insufficient"
    full = [score_judge(j, 0.8) for j in "abcd"]
    assert item_consensus(ITEM, full, 4, "", quorum=4).status == "ok"
    assert item_consensus(ITEM, full[:3], 4, "", quorum=4).status == "insufficient"


def test_no_judgments_at_all_is_insufficient() -> None:
    c = item_consensus(ITEM, [], n_judges=3, text="anything")
    assert c.status == "insufficient"
    assert c.n_answered == 0


# --- worked examples: spans --------------------------------------------------------------

TOWER = "The tower is 330 metres tall and opened in 1889."
# index:  0         1         2         3         4
#         0123456789012345678901234567890123456789012345678


def test_three_span_judges_hand_computed() -> None:
    assert TOWER[13:23] == "330 metres"
    assert TOWER[4:15] == "tower is 33"
    assert TOWER[14:21] == "30 metr"
    a = span_judge("a", [(13, 23)], TOWER)
    b = span_judge("b", [(4, 15)], TOWER)
    # c marks 16..18 twice (overlapping spans count once), 1889 alone, and one span that
    # could not be anchored.
    c_spans = (span_at(14, 21, TOWER), span_at(16, 19, TOWER), span_at(43, 47, TOWER))
    c = Judgment(ITEM, "c", "spans", 1.0, spans=(*c_spans, span_at(None, None)))

    votes = character_votes([[(13, 23)], [(4, 15)], [(14, 21), (16, 19), (43, 47)]], len(TOWER))
    # 4..12: b | 13: a b | 14: a b c | 15..20: a c | 21..22: a | 43..46: c
    expected = [0] * len(TOWER)
    for i in range(4, 13):
        expected[i] = 1
    expected[13] = 2
    expected[14] = 3
    for i in range(15, 21):
        expected[i] = 2
    expected[21] = expected[22] = 1
    for i in range(43, 47):
        expected[i] = 1
    assert votes.tolist() == expected

    # Majority (>= 2 of 3) is chars 13..20, "330 metr"; snapping the end finishes "metres".
    assert majority_runs(votes, 3) == [(13, 21)]
    assert snap_to_words([(13, 21)], TOWER) == [(13, 23)]

    consensus = item_consensus(ITEM, [a, b, c], n_judges=3, text=TOWER)
    assert consensus.n_span_judges == 3
    assert consensus.hallucinated is True
    assert len(consensus.spans) == 1
    span = consensus.spans[0]
    assert (span.char_start, span.char_end, span.text) == (13, 23, "330 metres")
    assert (span.votes, span.min_votes) == (3, 2)


def test_snapping_merges_runs_inside_one_word() -> None:
    text = "unbelievable claim"
    judgments = [
        span_judge("a", [(0, 2), (6, 8)], text),
        span_judge("b", [(0, 2), (6, 8)], text),
        span_judge("c", [(7, 8)], text),
    ]
    # Majority runs "un" (2 votes) and "ev" (2, 3 votes) both snap to "unbelievable".
    c = item_consensus(ITEM, judgments, n_judges=3, text=text)
    assert [(s.char_start, s.char_end, s.text, s.votes, s.min_votes) for s in c.spans] == [
        (0, 12, "unbelievable", 3, 2)
    ]


def test_score_only_judges_do_not_vote_on_spans() -> None:
    text = "The moon is made of cheese."
    cheese = (20, 26)
    assert text[slice(*cheese)] == "cheese"
    judgments = [
        span_judge("a", [cheese], text),
        span_judge("b", [], text),
        # Two score judges that also carry spans: were they voters, "cheese" would have
        # 3 of 4 votes; as it is, the span vote is 1 of 2, a tie.
        score_judge("c", 0.9, (span_at(*cheese, text),)),
        score_judge("d", 0.9, (span_at(*cheese, text),)),
    ]
    c = item_consensus(ITEM, judgments, n_judges=4, text=text)
    assert c.n_span_judges == 2
    assert c.spans == ()
    assert c.score_median == pytest.approx(0.9)  # median of 0, 0.9, 0.9, 1

    # The same two span judges agreeing is a majority of the span voters.
    agreeing = [span_judge("a", [cheese], text), span_judge("b", [cheese], text), *judgments[2:]]
    c = item_consensus(ITEM, agreeing, n_judges=4, text=text)
    assert [(s.text, s.votes, s.min_votes) for s in c.spans] == [("cheese", 2, 2)]


def test_unanchored_spans_do_not_vote() -> None:
    text = "Napoleon was tall."
    tall = span_at(13, 17, text)
    judgments = [
        Judgment(ITEM, "a", "spans", 1.0, spans=(tall,)),
        # These judges flagged something that could not be located: a score of 1, no vote.
        Judgment(ITEM, "b", "spans", 1.0, spans=(span_at(None, None),)),
        Judgment(ITEM, "c", "spans", 1.0, spans=(span_at(None, None),)),
    ]
    c = item_consensus(ITEM, judgments, n_judges=3, text=text)
    # A span panel is hallucinated iff its consensus has a span; all three judges say
    # something is wrong, none agree where: unlocalised, never a contradiction.
    assert c.hallucinated is False
    assert c.unlocalised is True
    assert c.verdict_rule == "spans"
    assert c.n_span_judges == 3
    assert c.spans == ()
    assert not c.contradicts


def test_failed_span_judge_does_not_vote() -> None:
    text = "Napoleon was tall."
    judgments = [
        span_judge("a", [(13, 17)], text),
        span_judge("b", [(13, 17)], text),
        failed("c", "spans"),
        failed("d", "spans"),
    ]
    # 2 of the 2 answering span judges: a majority, though only half of the panel.
    c = item_consensus(ITEM, judgments, n_judges=4, text=text, quorum=2)
    assert c.n_span_judges == 2
    assert [(s.text, s.votes) for s in c.spans] == [("tall", 2)]


def test_offsets_outside_the_text_are_clipped() -> None:
    text = "abc def"
    judgments = [span_judge("a", [(-5, 2), (5, 40)]), span_judge("b", [(-1, 3), (4, 99)])]
    c = item_consensus(ITEM, judgments, n_judges=2, text=text)
    assert [(s.char_start, s.char_end, s.text) for s in c.spans] == [(0, 3, "abc"), (4, 7, "def")]


def test_snap_to_words_examples() -> None:
    text = "foo_bar, baz qux"
    assert snap_to_words([(2, 5)], text) == [(0, 7)]  # underscore is a word character
    assert snap_to_words([(7, 9)], text) == [(7, 9)]  # ", " has no word to finish
    assert snap_to_words([(10, 11), (14, 15)], text) == [(9, 12), (13, 16)]
    assert snap_to_words([(10, 11), (11, 14)], text) == [(9, 16)]  # touching: merged
    assert snap_to_words([], text) == []
    assert snap_to_words([(3, 3)], text) == []  # empty runs vanish


def test_majority_runs_at_text_edges() -> None:
    assert majority_runs(np.array([2, 2, 0, 2]), 3) == [(0, 2), (3, 4)]
    assert majority_runs(np.array([], dtype=np.int64), 3) == []


def test_panel_consensus_per_item() -> None:
    texts = {"x": "one two", "y": "three"}
    by_item = {
        "x": [Judgment("x", "a", "spans", 1.0, spans=(span_at(0, 3, texts["x"]),))],
        "y": [unscored("y", "a", "spans", "timeout")],
    }
    results = panel_consensus(by_item, texts, n_judges=1)
    assert [(c.item_id, c.status) for c in results] == [("x", "ok"), ("y", "insufficient")]
    assert [s.text for s in results[0].spans] == ["one"]


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(("n_judges", "quorum"), [(0, None), (-1, None), (3, 0), (3, 4)])
def test_bad_panel_size_or_quorum(n_judges: int, quorum: int | None) -> None:
    with pytest.raises(ValueError, match=r"judge|quorum"):
        item_consensus(ITEM, [], n_judges=n_judges, text="", quorum=quorum)


def test_duplicate_judge_rejected() -> None:
    with pytest.raises(ValueError, match="judge 'a' has more than one judgment"):
        item_consensus(ITEM, [score_judge("a", 0.1), failed("a")], n_judges=3, text="")


def test_more_judgments_than_panel_rejected() -> None:
    with pytest.raises(ValueError, match="panel has only 1"):
        item_consensus(ITEM, [score_judge("a", 0.1), score_judge("b", 0.1)], 1, "")


def test_judgment_for_another_item_rejected() -> None:
    other = Judgment("other", "a", "score", 0.5)
    with pytest.raises(ValueError, match="is for item 'other'"):
        item_consensus(ITEM, [other], n_judges=1, text="")


def test_panel_consensus_needs_every_text() -> None:
    with pytest.raises(ValueError, match="no judged text"):
        panel_consensus({"x": []}, {}, n_judges=1)


def test_doctests_pass() -> None:
    result = doctest.testmod(juryflow.maths.consensus)
    assert result.attempted > 0
    assert result.failed == 0


# --- properties --------------------------------------------------------------------------

texts = st.text(alphabet="ab_1 .,\né", max_size=40)


@st.composite
def text_and_spans(
    draw: st.DrawFn, min_judges: int = 1, max_judges: int = 5
) -> tuple[str, list[list[tuple[int, int]]]]:
    """A text and, per judge, a list of (possibly overlapping, possibly empty) spans in it."""
    text = draw(texts)
    n = len(text)
    span = st.tuples(st.integers(0, n), st.integers(0, n)).map(lambda p: (min(p), max(p)))
    per_judge = draw(st.lists(st.lists(span, max_size=4), min_size=min_judges, max_size=max_judges))
    return text, per_judge


def span_judges(text: str, per_judge: Sequence[Sequence[tuple[int, int]]]) -> list[Judgment]:
    return [span_judge(f"j{i}", spans, text) for i, spans in enumerate(per_judge)]


@given(text_and_spans(), st.lists(st.floats(0, 1), max_size=3), st.randoms())
def test_order_of_judges_does_not_matter(
    case: tuple[str, list[list[tuple[int, int]]]], scores: list[float], rnd: random.Random
) -> None:
    text, per_judge = case
    judgments = span_judges(text, per_judge)
    judgments += [score_judge(f"s{i}", s) for i, s in enumerate(scores)]
    judgments.append(failed("failed"))
    n = len(judgments)
    shuffled = list(judgments)
    rnd.shuffle(shuffled)
    assert item_consensus(ITEM, shuffled, n, text, quorum=1) == item_consensus(
        ITEM, judgments, n, text, quorum=1
    )


@given(text_and_spans(max_judges=1), st.integers(1, 5))
def test_identical_judges_give_their_spans_back(
    case: tuple[str, list[list[tuple[int, int]]]], k: int
) -> None:
    text, (spans,) = case
    c = item_consensus(ITEM, span_judges(text, [spans] * k), k, text)
    assert ranges(c) == snap_to_words(spans, text)
    assert all(s.votes == k and s.min_votes == k for s in c.spans)
    assert all(s.text == text[s.char_start : s.char_end] for s in c.spans)


@given(text_and_spans(), st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40))))
def test_one_more_agreeing_judge_never_removes_a_character(
    case: tuple[str, list[list[tuple[int, int]]]], extra: list[tuple[int, int]]
) -> None:
    text, per_judge = case
    n = len(per_judge) + 1
    before = item_consensus(ITEM, span_judges(text, per_judge), n, text, quorum=1)
    # The newcomer marks every consensus character, and possibly more.
    newcomer = ranges(before) + [(min(p), max(p)) for p in extra]
    after = item_consensus(ITEM, span_judges(text, [*per_judge, newcomer]), n, text, quorum=1)
    assert chars(ranges(before)) <= chars(ranges(after))


@given(st.lists(st.floats(0, 1), min_size=1, max_size=9))
def test_median_is_within_min_and_max(scores: list[float]) -> None:
    judgments = [score_judge(f"j{i}", s) for i, s in enumerate(scores)]
    c = item_consensus(ITEM, judgments, len(scores), "")
    assert c.score_min is not None and c.score_max is not None and c.score_median is not None
    assert c.score_min <= c.score_median <= c.score_max
    assert c.score_spread == c.score_max - c.score_min
    # A strict majority of the judges' own verdicts (score >= 0.5): on an odd panel that is
    # "median >= 0.5"; on an even one a tie is clean.
    assert c.hallucinated == (2 * sum(s >= 0.5 for s in scores) > len(scores))
    if len(scores) % 2:
        assert c.hallucinated == (c.score_median >= 0.5)


def test_an_even_split_of_continuous_scores_is_not_a_majority() -> None:
    # Two judges at 0.0 and two at 0.6 under the score prompt's 0.3 threshold: the median is
    # 0.3, "at the threshold", yet only half the panel called it hallucinated.
    judgments = [
        Judgment(ITEM, f"j{i}", "score", s, verdict_threshold=0.3)
        for i, s in enumerate((0.0, 0.0, 0.6, 0.6))
    ]
    c = item_consensus(ITEM, judgments, 4, "")
    assert c.score_median == pytest.approx(0.3)
    assert c.hallucinated is False
    tipped = [*judgments[1:], Judgment(ITEM, "j4", "score", 0.3, verdict_threshold=0.3)]
    assert item_consensus(ITEM, tipped, 4, "").hallucinated is True


@given(text_and_spans())
def test_consensus_is_within_the_snapped_union(
    case: tuple[str, list[list[tuple[int, int]]]],
) -> None:
    text, per_judge = case
    c = item_consensus(ITEM, span_judges(text, per_judge), len(per_judge), text)
    union = snap_to_words([s for spans in per_judge for s in spans], text)
    assert chars(ranges(c)) <= chars(union)
    for span in c.spans:
        assert 2 * span.min_votes > len(per_judge)
        assert span.min_votes <= span.votes <= len(per_judge)


@given(text_and_spans(max_judges=4), st.sampled_from(["score", "spans"]))
def test_an_unscored_judgment_changes_nothing(
    case: tuple[str, list[list[tuple[int, int]]]], kind: str
) -> None:
    text, per_judge = case
    n = len(per_judge) + 1
    judgments = span_judges(text, per_judge)
    # Even carrying spans, a judgment without a score casts no vote.
    ghost = unscored(
        ITEM,
        "ghost",
        kind,  # type: ignore[arg-type]
        "timeout",
        spans=tuple(span_at(0, len(text), text) for _ in range(2)),
    )
    assert item_consensus(ITEM, [*judgments, ghost], n, text) == item_consensus(
        ITEM, judgments, n, text
    )


@settings(max_examples=200, deadline=None)
@given(text_and_spans(max_judges=6))
def test_character_votes_match_a_naive_count(
    case: tuple[str, list[list[tuple[int, int]]]],
) -> None:
    text, per_judge = case
    expected = [
        sum(any(s <= i < e for s, e in spans) for spans in per_judge) for i in range(len(text))
    ]
    assert character_votes(per_judge, len(text)).tolist() == expected


@given(st.lists(st.integers(0, 4), max_size=30), st.integers(1, 4))
def test_majority_runs_match_a_naive_scan(votes: list[int], n_voters: int) -> None:
    runs = majority_runs(np.array(votes, dtype=np.int64), n_voters)
    assert chars(runs) == {i for i, v in enumerate(votes) if 2 * v > n_voters}
    # Maximal: no two runs touch.
    assert all(a[1] < b[0] for a, b in itertools.pairwise(runs))
