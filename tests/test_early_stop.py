"""Exact early stopping (issue 24, point 3): an item the called judges have decided gets the
same result from the full panel, for every rule that claims exactness."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juryflow.maths.consensus import item_consensus
from juryflow.maths.early_stop import (
    EXACT_RULES,
    JudgeShape,
    decision,
    first_round_size,
    in_audit,
    is_decided,
    ordered,
    refusal,
)
from juryflow.maths.records import Judgment, Span
from juryflow.maths.reducers import ConsensusRule

PROPERTY = settings(
    max_examples=300,
    deadline=None,  # a loaded 2-core machine must not fail a proof for being slow
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TEXTS = st.text(alphabet="ab c.", min_size=0, max_size=14)
SCORES = st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.6, 0.9, 1.0]) | st.floats(0.0, 1.0)


@st.composite
def rules(draw: st.DrawFn) -> ConsensusRule:
    spans = draw(st.sampled_from(["majority", "union", "at_least:1", "at_least:2", "at_least:3"]))
    verdict = draw(
        st.sampled_from(["auto", "majority", "spans", "at_least:1", "at_least:2", "score:0.5"])
    )
    score = draw(st.sampled_from(["median", "mean", "trimmed_mean"]))
    return ConsensusRule.from_dict({"score": score, "spans": spans, "verdict": verdict})


@st.composite
def answers(draw: st.DrawFn, judge_id: str, kind: str, threshold: float, text: str) -> Judgment:
    if draw(st.integers(0, 5)) == 0:
        return Judgment("i", judge_id, kind, None, unscored_reason="unparseable output: x")  # type: ignore[arg-type]
    if kind == "score":
        return Judgment("i", judge_id, "score", draw(SCORES), verdict_threshold=threshold)
    spans: list[Span] = []
    for _ in range(draw(st.integers(0, 3))):
        if not text:
            spans.append(Span(None, None, "zz", "unmatched"))
            continue
        start = draw(st.integers(0, len(text) - 1))
        end = draw(st.integers(start + 1, len(text)))
        match = draw(st.sampled_from(["exact", "exact", "fuzzy", "ambiguous", "unmatched"]))
        if match == "unmatched":
            spans.append(Span(None, None, text[start:end], "unmatched"))
        else:
            spans.append(Span(start, end, text[start:end], match))  # type: ignore[arg-type]
    score = 1.0 if any(s.anchored for s in spans) else 0.0
    return Judgment("i", judge_id, "spans", score, spans=tuple(spans), verdict_threshold=threshold)


@st.composite
def panels(draw: st.DrawFn) -> tuple[list[Judgment], list[int], str, int | None, ConsensusRule]:
    n = draw(st.integers(1, 5))
    text = draw(TEXTS)
    all_spans = draw(st.booleans())
    # Judges that often agree: otherwise almost nothing is ever decided and the property
    # would hold vacuously.
    herd = draw(st.booleans())
    shared: dict[tuple[str, float], Judgment] = {}
    judgments = []
    for j in range(n):
        kind = "spans" if all_spans or draw(st.booleans()) else "score"
        threshold = draw(st.sampled_from([0.3, 0.5, 1.0]))
        key = (kind, threshold)
        if herd and key in shared and draw(st.integers(0, 3)) > 0:
            judgments.append(dataclasses.replace(shared[key], judge_id=f"j{j}"))
            continue
        judgments.append(draw(answers(f"j{j}", kind, threshold, text)))
        shared.setdefault(key, judgments[-1])
    quorum = draw(st.none() | st.integers(1, n))
    called = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    return judgments, called, text, quorum, draw(rules())


def _shape(judgment: Judgment) -> JudgeShape:
    return JudgeShape(judgment.judge_id, judgment.output_kind, judgment.verdict_threshold)


@PROPERTY
@given(panels())
def test_a_decided_item_gets_the_full_panels_result(
    case: tuple[list[Judgment], list[int], str, int | None, ConsensusRule],
) -> None:
    judgments, called_at, text, quorum, rule = case
    n = len(judgments)
    # In panel order, as the run combines them: a mean summed in another order can differ
    # in its last bit.
    called = [judgments[i] for i in sorted(called_at)]
    uncalled = [_shape(judgments[i]) for i in range(n) if i not in called_at]
    if not is_decided("i", called, uncalled, n, text, quorum, rule):
        return
    early = item_consensus("i", called, n, text, quorum, rule=rule)
    full = item_consensus("i", judgments, n, text, quorum, rule=rule)
    assert decision(early) == decision(full)


@PROPERTY
@given(panels(), st.data())
def test_every_answer_of_the_uncalled_judges_leaves_a_decided_result(
    case: tuple[list[Judgment], list[int], str, int | None, ConsensusRule], data: st.DataObject
) -> None:
    """Stronger than the full panel's one answer: any answers the uncalled judges might give."""
    judgments, called_at, text, quorum, rule = case
    n = len(judgments)
    called = [judgments[i] for i in sorted(called_at)]
    uncalled = [_shape(judgments[i]) for i in range(n) if i not in called_at]
    if not is_decided("i", called, uncalled, n, text, quorum, rule):
        return
    others = {
        s.judge_id: data.draw(answers(s.judge_id, s.output_kind, s.verdict_threshold, text))
        for s in uncalled
    }
    panel = [others.get(j.judge_id, j) for j in judgments]
    early = item_consensus("i", called, n, text, quorum, rule=rule)
    full = item_consensus("i", panel, n, text, quorum, rule=rule)
    assert decision(early) == decision(full)


def _spans_judgment(judge_id: str, text: str, flagged: str | None) -> Judgment:
    if flagged is None:
        return Judgment("i", judge_id, "spans", 0.0)
    start = text.index(flagged)
    span = Span(start, start + len(flagged), flagged, "exact")
    return Judgment("i", judge_id, "spans", 1.0, spans=(span,))


def test_two_agreeing_span_judges_decide_a_three_judge_majority() -> None:
    text = "It opens at noon and has valet parking."
    rule = ConsensusRule.from_dict({"spans": "majority", "verdict": "spans"})
    third = [JudgeShape("c", "spans", 0.5)]
    both = [_spans_judgment(j, text, "valet parking") for j in ("a", "b")]
    assert is_decided("i", both, third, 3, text, None, rule)
    clean = [_spans_judgment(j, text, None) for j in ("a", "b")]
    assert is_decided("i", clean, third, 3, text, None, rule)
    # One flags, one does not: the third judge decides.
    split = [_spans_judgment("a", text, "valet parking"), _spans_judgment("b", text, None)]
    assert not is_decided("i", split, third, 3, text, None, rule)
    # Different spans: the third judge's marks decide which characters win.
    apart = [_spans_judgment("a", text, "noon"), _spans_judgment("b", text, "valet parking")]
    assert not is_decided("i", apart, third, 3, text, None, rule)


def test_an_unscored_judge_leaves_the_item_open() -> None:
    rule = ConsensusRule()
    one = [
        Judgment("i", "a", "score", 0.9),
        Judgment("i", "b", "score", None, unscored_reason="provider error"),
    ]
    assert not is_decided("i", one, [JudgeShape("c", "score", 0.5)], 3, "", None, rule)


def test_rules_that_are_not_monotone_are_refused() -> None:
    assert refusal(ConsensusRule()) is None
    weighted = ConsensusRule.from_dict({"verdict": "weighted", "weights": {"a": 2}})
    assert refusal(weighted) is not None
    assert refusal(ConsensusRule.from_dict({"spans": "dawid_skene"})) is not None
    assert "weighted" not in EXACT_RULES["verdict"]


def test_audit_sample_is_seeded_and_near_its_fraction() -> None:
    ids = [f"item-{i}" for i in range(4000)]
    chosen = [i for i in ids if in_audit(i, 0.1, 7)]
    assert 300 < len(chosen) < 500
    assert chosen == [i for i in ids if in_audit(i, 0.1, 7)]
    assert chosen != [i for i in ids if in_audit(i, 0.1, 8)]


def test_order_and_first_round() -> None:
    assert ordered(["x", "y", "z"], {"x": 2.0, "y": 0.0, "z": 2.0}) == ["y", "x", "z"]
    assert first_round_size(3, None) == 2
    assert first_round_size(3, 3) == 3


@st.composite
def pairwise_panels(draw: st.DrawFn) -> tuple[list[Judgment], list[int], int | None]:
    """Pairwise judges (A 0, tie 0.5, B 1; unscored: an inconsistent or missing order) under
    the plurality rule, often agreeing so that items get decided."""
    n = draw(st.integers(1, 6))
    verdicts = st.sampled_from([0.0, 0.5, 1.0, None])
    herd = draw(verdicts)
    judgments = []
    for j in range(n):
        v = herd if draw(st.booleans()) else draw(verdicts)
        reason = "inconsistent: A with A shown first, B with B shown first" if v is None else None
        judgments.append(
            Judgment("i", f"j{j}", "preference", v, unscored_reason=reason, verdict_threshold=0.75)
        )
    quorum = draw(st.none() | st.integers(1, n))
    called = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    return judgments, called, quorum


@PROPERTY
@given(pairwise_panels(), st.data())
def test_a_decided_pairwise_item_stays_decided_whatever_the_uncalled_judges_say(
    case: tuple[list[Judgment], list[int], int | None], data: st.DataObject
) -> None:
    judgments, called_at, quorum = case
    rule = ConsensusRule.from_dict({"score": "preference"})
    n = len(judgments)
    called = [judgments[i] for i in sorted(called_at)]
    uncalled = [_shape(judgments[i]) for i in range(n) if i not in called_at]
    if not is_decided("i", called, uncalled, n, "", quorum, rule):
        return
    others = {}
    for shape in uncalled:
        v = data.draw(st.sampled_from([0.0, 0.5, 1.0, None]))
        others[shape.judge_id] = Judgment(
            "i", shape.judge_id, "preference", v, unscored_reason=None if v is not None else "x",
            verdict_threshold=0.75,
        )  # fmt: skip
    panel = [others.get(j.judge_id, j) for j in judgments]
    early = item_consensus("i", called, n, "", quorum, rule=rule)
    full = item_consensus("i", panel, n, "", quorum, rule=rule)
    assert decision(early) == decision(full)
