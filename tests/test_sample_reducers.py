"""The sample reducers (issue 26, point 1): properties of every registered one, by Hypothesis.

Order of the samples never matters; one scored sample is returned unchanged; the reduced
score stays within the samples' scores (a span judge's is 0 or 1); unscored samples are
filtered out, and a judge whose samples are all unscored is unscored with a reason.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.judges.panel import PanelError, parse_panel
from juryflow.judges.sampling.keys import reduced_cache_key, sample_cache_key
from juryflow.judges.sampling.panel_samples import sampling_warnings
from juryflow.maths.consensus import consensus_spans, coverage
from juryflow.maths.records import Judgment, Span, Usage
from juryflow.maths.samples.reducers import (
    SampleReducerError,
    reduce_samples,
    resolve_sample_reducer,
    sample_reducer_names,
)
from juryflow.planning.run_request import RunRequest

TEXT = "The cafe opens at 9 am, serves ramen on Sundays and closes in 1889 at noon."
SCORES = st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.6, 0.9, 1.0])


@st.composite
def score_sample(draw: st.DrawFn) -> Judgment:
    if draw(st.integers(0, 5)) == 0:
        return Judgment("i", "j", "score", None, unscored_reason="unparseable output: x")
    score = draw(SCORES)
    return Judgment("i", "j", "score", score, usage=Usage(10, 5, 0.001), verdict_threshold=0.5)


@st.composite
def span_sample(draw: st.DrawFn) -> Judgment:
    if draw(st.integers(0, 5)) == 0:
        return Judgment("i", "j", "spans", None, unscored_reason="provider error: 500")
    spans = []
    for _ in range(draw(st.integers(0, 3))):
        start = draw(st.integers(0, len(TEXT) - 1))
        end = draw(st.integers(start + 1, len(TEXT)))
        spans.append(Span(start, end, TEXT[start:end], "exact"))
    return Judgment("i", "j", "spans", 1.0 if spans else 0.0, spans=tuple(spans))


def _samples(kind: str) -> st.SearchStrategy[list[Judgment]]:
    return st.lists(score_sample() if kind == "score" else span_sample(), min_size=1, max_size=7)


def _answer(judgment: Judgment) -> tuple[object, ...]:
    return judgment.score, judgment.spans, judgment.unscored_reason


@pytest.mark.parametrize(
    ("kind", "reducer"),
    [("score", name) for name in sample_reducer_names("score")]
    + [("spans", name) for name in sample_reducer_names("spans")],
)
@settings(deadline=None, max_examples=150)
@given(data=st.data())
def test_every_reducer_is_order_free_bounded_and_filters_unscored(
    kind: str, reducer: str, data: st.DataObject
) -> None:
    samples = data.draw(_samples(kind))
    shuffled = data.draw(st.permutations(samples))
    reduced = reduce_samples(samples, reducer, TEXT)
    assert _answer(reduce_samples(shuffled, reducer, TEXT)) == _answer(reduced)
    assert reduced.samples == tuple(samples)
    scored = [s for s in samples if s.score is not None]
    if not scored:
        assert reduced.score is None
        assert reduced.unscored_reason and f"all {len(samples)} samples unscored" in (
            reduced.unscored_reason
        )
        return
    assert reduced.score is not None
    if kind == "score":
        assert min(s.score for s in scored) <= reduced.score <= max(s.score for s in scored)
    else:
        assert reduced.score in (0.0, 1.0)
        # Only characters some sample marked.
        marked = coverage(
            [[(s.char_start, s.char_end) for s in j.spans] for j in scored], len(TEXT)
        )
        for span in reduced.spans:
            assert span.char_start is not None and span.char_end is not None
            assert marked.any(axis=0)[span.char_start : span.char_end].any()
    # Unscored samples take no part: dropping them changes nothing.
    assert _answer(reduce_samples(scored, reducer, TEXT)) == (*_answer(reduced)[:2], None)


@pytest.mark.parametrize("kind", ["score", "spans"])
@settings(deadline=None, max_examples=100)
@given(data=st.data())
def test_one_scored_sample_is_returned_unchanged(kind: str, data: st.DataObject) -> None:
    sample = data.draw(score_sample() if kind == "score" else span_sample())
    for reducer in sample_reducer_names(kind):  # type: ignore[arg-type]
        reduced = reduce_samples([sample], reducer, TEXT)
        assert _answer(reduced) == _answer(sample) or sample.score is None
        assert reduced.usage == sample.usage


@settings(deadline=None, max_examples=150)
@given(samples=_samples("score"))
def test_the_median_gives_the_strict_majority_verdict(samples: list[Judgment]) -> None:
    scored = [s for s in samples if s.score is not None]
    reduced = reduce_samples(samples, "median", TEXT)
    if scored:
        majority = sum(bool(s.verdict) for s in scored) * 2 > len(scored)
        assert reduced.verdict == majority


@settings(deadline=None, max_examples=150)
@given(samples=_samples("spans"))
def test_majority_spans_are_the_consensus_code_over_samples(samples: list[Judgment]) -> None:
    scored = [s for s in samples if s.score is not None]
    reduced = reduce_samples(samples, "majority", TEXT)
    if len(scored) < 2:
        return
    runs = [[(s.char_start, s.char_end) for s in j.voting_spans] for j in scored]
    votes = coverage(runs, len(TEXT)).sum(axis=0)
    expected = consensus_spans(votes, len(scored), TEXT)
    assert [(s.char_start, s.char_end) for s in reduced.spans] == [
        (s.char_start, s.char_end) for s in expected
    ]
    assert reduced.verdict == (sum(bool(s.verdict) for s in scored) * 2 > len(scored))


def test_costs_and_tokens_are_sums_of_what_the_run_paid() -> None:
    samples = [
        Judgment("i", "j", "score", 0.2, usage=Usage(100, 10, 0.01), cached=True),
        Judgment("i", "j", "score", 0.9, usage=Usage(100, 20, 0.02)),
        Judgment("i", "j", "score", 0.4, usage=Usage(100, 30, 0.03), cached=True),
    ]
    reduced = reduce_samples(samples, "median", TEXT, cache_key="k")
    assert reduced.score == 0.4
    # What this run paid: the one sample not from the cache.
    assert (reduced.usage.input_tokens, reduced.usage.output_tokens) == (100, 20)
    assert reduced.usage.cost_usd == pytest.approx(0.02)
    assert reduced.cached is False and reduced.cache_key == "k"
    fresh = [replace(s, cached=False) for s in samples]
    assert reduce_samples(fresh, "median", TEXT).usage == Usage(300, 60, pytest.approx(0.06))
    cached = reduce_samples([replace(s, cached=True) for s in samples], "median", TEXT)
    assert cached.cached and cached.usage.cost_usd == pytest.approx(0.06)
    assert reduced.reasoning == "median of 3 scored samples of 3"
    assert reduce_samples(samples, "mean", TEXT).score == pytest.approx(0.5)


def test_reducer_names_are_checked_against_the_judge_kind() -> None:
    assert resolve_sample_reducer(None, "score") == "median"
    assert resolve_sample_reducer(None, "spans") == "majority"
    with pytest.raises(SampleReducerError, match="for a score judge use one of: mean, median"):
        resolve_sample_reducer("majority", "score")
    with pytest.raises(SampleReducerError, match="unknown sample reducer 'mode'"):
        resolve_sample_reducer("mode", "spans")


def test_sample_0_keeps_the_single_call_key() -> None:
    assert sample_cache_key("abc", 0) == "abc"
    keys = {sample_cache_key("abc", k) for k in range(5)}
    assert len(keys) == 5
    assert reduced_cache_key("abc", 3, "median") not in keys


# --- the panel file ---------------------------------------------------------------------------


def _judge(**extra: object) -> dict[str, object]:
    return {"id": "a", "provider": "openai", "model": "m", "prompt": "hallucination_score", **extra}


def test_panel_samples_default_to_one_and_the_panel_default_spreads_to_llm_judges() -> None:
    assert parse_panel({"judges": [_judge()]}).judges[0].samples == 1
    offline = {"id": "n", "provider": "offline", "detector": "numbers"}
    panel = parse_panel({"samples": 3, "judges": [_judge(), offline, _judge(id="b", samples=2)]})
    assert [j.samples for j in panel.judges] == [3, 1, 2]
    stored = panel.public_dict()
    assert stored["judges"][0]["sample_reducer"] == "median"  # stored with the run by name
    assert "samples" not in stored["judges"][1]
    again = parse_panel(stored)
    assert again.public_dict() == stored


def test_offline_detectors_refuse_samples_in_one_line() -> None:
    offline = {"id": "n", "provider": "offline", "detector": "numbers", "samples": 3}
    with pytest.raises(PanelError, match=r"offline detector answers the same every time.*remove"):
        parse_panel({"judges": [_judge(), offline]})


@pytest.mark.parametrize("bad", [0, -1, "many"])
def test_samples_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(PanelError, match="samples"):
        parse_panel({"judges": [_judge(samples=bad)]})


def test_a_reducer_unfit_for_the_judge_is_refused() -> None:
    with pytest.raises(PanelError, match="judge 'a': a score judge cannot use 'majority'"):
        parse_panel({"judges": [_judge(samples=3, sample_reducer="majority")]})


def test_samples_at_temperature_0_warn_in_one_line() -> None:
    cold = parse_panel({"judges": [_judge(samples=3), _judge(id="b", samples=3, temperature=0.7)]})
    (line,) = sampling_warnings(cold)
    assert line.startswith("judge a (samples: 3) at temperature 0: a deterministic model's")
    two = parse_panel({"judges": [_judge(samples=3), _judge(id="b", samples=2)]})
    (line,) = sampling_warnings(two)  # one line for the panel
    assert line.startswith("judge a (samples: 3), b (samples: 2) at temperature 0")
    assert "\n" not in line and "temperature" in line
    assert sampling_warnings(parse_panel({"judges": [_judge()]})) == []


def test_samples_go_through_a_batch() -> None:
    panel = parse_panel({"batch": True, "judges": [_judge(samples=2, temperature=0.7)]})
    assert panel.uses_batch(panel.judges[0]) and panel.judges[0].samples == 2


def test_the_dry_run_counts_a_call_per_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.planning.dry_run import estimate_run
    from tests.conftest import SAMPLE

    monkeypatch.setenv("JURYFLOW_DRY_KEY", "sk-dry")
    judge = (
        "{{id: {id}, provider: openai, model: gpt-4.1, prompt: data2txt_spans, "
        "api_key_env: JURYFLOW_DRY_KEY{extra}}}"
    )
    panel = tmp_path / "panel.yaml"
    panel.write_text(
        "judges:\n"
        f"  - {judge.format(id='once', extra='')}\n"
        f"  - {judge.format(id='thrice', extra=', samples: 3, temperature: 0.7')}\n",
        encoding="utf-8",
    )
    estimate = estimate_run(
        RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(tmp_path / "s.duckdb"), limit=5)
    )
    calls = {j.judge_id: j.calls for j in estimate.judges}
    assert calls == {"once": 5, "thrice": 15}


def _sampled_panel(tmp_path: Path, extra: str) -> Path:
    panel = tmp_path / "panel.yaml"
    panel.write_text(
        "judges:\n"
        "  - {id: a, provider: openai, model: gpt-4.1, prompt: data2txt_spans, "
        f"api_key_env: JURYFLOW_DRY_KEY, samples: 3{extra}}}\n",
        encoding="utf-8",
    )
    return panel


def test_the_run_warns_of_samples_at_temperature_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.planning.run_setup import preflight
    from tests.conftest import SAMPLE

    monkeypatch.setenv("JURYFLOW_DRY_KEY", "sk-dry")
    db = str(tmp_path / "s.duckdb")
    (line,) = preflight(
        RunRequest(
            dataset=str(SAMPLE), panel=str(_sampled_panel(tmp_path, "")), mapping=None, db=db
        )
    )
    assert "a (samples: 3) at temperature 0: a deterministic model's samples are copies" in line
    assert (
        preflight(
            RunRequest(
                dataset=str(SAMPLE),
                panel=str(_sampled_panel(tmp_path, ", temperature: 0.7")),
                mapping=None,
                db=db,
            )
        )
        == []
    )


def test_the_command_line_sends_samples_in_batches_counted_per_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from juryflow.cli import app
    from tests.conftest import SAMPLE

    monkeypatch.setenv("JURYFLOW_DRY_KEY", "sk-dry")
    panel = _sampled_panel(tmp_path, ", temperature: 0.7")
    args = ["run", str(SAMPLE), "--panel", str(panel), "--db", str(tmp_path / "s.duckdb")]
    result = CliRunner().invoke(app, [*args, "--limit", "5", "--batch", "--dry-run"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "│ a │ gpt-4.1 │ 15 │" in text  # a call per sample, 3 of each of 5 items
    assert "batch: a's calls go through its provider's batch API, costed at batch prices" in text
