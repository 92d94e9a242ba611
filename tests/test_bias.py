"""Bias probes against labels (issue 26, point 4): the maths against reference computations,
the family table, the simulator's length bias, and a real run of simulated judges through
the stand-in whose length bias ``juryflow agreement --bias`` recovers within its interval."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import statsmodels.api as sm
from typer.testing import CliRunner

from juryflow.analysis.bias_report import BiasReport, bias_report
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.families import family_of, judge_family
from juryflow.maths.agreement import ItemSpans
from juryflow.maths.bias import (
    NO_GOLD,
    gold_strata,
    long_responses,
    mh_risk_difference,
    position_shift,
    rate_difference,
)
from juryflow.planning.run_request import RunRequest
from juryflow.standin.simulator import Gold, GoldEntry, SimScore, SimSpans, parse_sim, sim_answer
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE, SHARED_DATA

DEV = SHARED_DATA / "data2txt_dev.jsonl"
DATA = DEV if DEV.exists() else SAMPLE
needs_dev = pytest.mark.skipif(
    not DEV.exists(),
    reason=f"{DEV} is absent: on the 60-row bundled sample a 95 % interval misses its "
    "setting too often (about one probe in twenty by design) to assert coverage",
)
KEY_ENV = "JURYFLOW_BIAS_KEY"
LENGTHY_SCORE = "stub-sim-score-L0.3"
PARTIAL_SCORE = "stub-sim-score-S0.3@meta"
"""A score judge right on every verdict but for its self-preference of 0.3 towards Meta's
models (it passes their hallucinations and flags others' clean responses with chance 0.3)."""
"""A score judge right on every verdict but for its length bias of 0.3 (the example panel
has a span judge with 0.4, ``lengthy``, and an unbiased one, ``fair``)."""


# -- the maths against references ------------------------------------------------------


def test_doctests_pass() -> None:
    import doctest

    import juryflow.judges.providers.families
    import juryflow.maths.bias

    for module in (juryflow.maths.bias, juryflow.judges.providers.families):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module.__name__


def _fixed_effects_slope(y: np.ndarray, x: np.ndarray, strata: np.ndarray, w: np.ndarray) -> float:
    """Weighted least squares of y on x with one intercept per stratum (statsmodels)."""
    dummies = (strata[:, None] == np.unique(strata)[None, :]).astype(float)
    fit = sm.WLS(y, np.column_stack([x, dummies]), weights=w).fit()
    return float(fit.params[0])


@pytest.mark.parametrize("seed", range(5))
def test_the_mh_difference_is_the_fixed_effects_slope(seed: int) -> None:
    """Mantel–Haenszel weights n1 n0 / N are what least squares with stratum intercepts
    gives each stratum's difference; with frequency weights (bootstrap draws) too."""
    rng = np.random.default_rng(seed)
    m = 300
    strata = rng.integers(0, 3, m)
    x = rng.random(m) < 0.4
    y = (rng.random(m) < 0.2 + 0.3 * x + 0.2 * (strata == 1)).astype(float)
    draws = rng.integers(0, 3, (4, m)).astype(float)
    got = mh_risk_difference(y, x, strata, np.vstack([np.ones(m), draws]))
    expected = [_fixed_effects_slope(y, x.astype(float), strata, w) for w in [np.ones(m), *draws]]
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_the_mh_difference_by_hand() -> None:
    """Two strata: 3/4 vs 1/4 flagged (weight 4*4/8 = 2) and 2/2 vs 1/2 (weight 1):
    (2 * 0.5 + 1 * 0.5) / 3 = 0.5."""
    y = [*(1, 1, 1, 0, 1, 0, 0, 0), *(1, 1, 1, 0)]
    x = [*(1, 1, 1, 1, 0, 0, 0, 0), *(1, 1, 0, 0)]
    strata = [0] * 8 + [1] * 4
    assert mh_risk_difference(y, x, strata)[0] == pytest.approx(0.5)
    # No stratum with both sides: nothing to compare.
    assert np.isnan(mh_risk_difference([1, 0], [1, 1], [0, 1])[0])


def test_strata_and_the_median_split() -> None:
    assert gold_strata([0.0, 1.0, np.nan]).tolist() == [0, 1, NO_GOLD]
    # Per stratum: the median of (1, 2, 3) is 2, of (10, 20, 30, 40) is 25.
    long = long_responses([1, 2, 3, 10, 20, 30, 40], [0, 0, 0, 1, 1, 1, 1])
    assert long.tolist() == [False, False, True, False, False, True, True]


def _sources(m: int, per_source: int = 6) -> np.ndarray:
    return np.asarray([f"s{i // per_source}" for i in range(m)])


def test_a_planted_self_preference_is_found_and_no_preference_is_not() -> None:
    """Own-family responses flagged 0.3 less often at equal gold; gold also differs by
    family, which a raw comparison would mistake for preference."""
    rng = np.random.default_rng(7)
    m = 1200
    own = np.tile([True, False, False, False, False, False], m // 6)
    gold = (rng.random(m) < np.where(own, 0.3, 0.7)).astype(float)
    base = np.where(gold == 1, 0.8, 0.4)
    biased = (rng.random(m) < base - 0.3 * own).astype(float)
    fair = (rng.random(m) < base).astype(float)
    strata = gold_strata(gold)
    groups = _sources(m)
    found = rate_difference(biased, own, strata, groups)
    assert found.low < -0.3 < found.high and found.excludes_zero
    assert found.n == m
    none = rate_difference(fair, own, strata, groups)
    assert none.low < 0 < none.high
    # Uncontrolled, the fair judge would look prejudiced against its own family.
    raw = fair[own].mean() - fair[~own].mean()
    assert raw < -0.15


def test_items_without_a_verdict_or_gold_are_left_out() -> None:
    verdicts = np.array([1, 0, np.nan, 1, 0, 1])
    gold = np.array([1, 1, 1, np.nan, 0, 0])
    effect = rate_difference(verdicts, [1, 0, 1, 1, 0, 1], gold_strata(gold), list("abcdef"))
    assert effect.n == 4
    assert effect.value == pytest.approx(1.0)
    # Without any gold, all items count, in one stratum.
    effect = rate_difference([1, 0, 1, 0], [1, 0, 1, 0], [NO_GOLD] * 4, list("abcd"))
    assert (effect.value, effect.n) == (1.0, 4)
    # One source: nothing to resample, so no interval.
    alone = rate_difference([1, 0, 1, 0], [1, 0, 1, 0], [NO_GOLD] * 4, ["x"] * 4)
    assert np.isnan(alone.low) and alone.value == 1.0


def _mean_position(sets: list[list[tuple[int, int]] | None], lengths: list[int]) -> float:
    """Character by character: each flagged character (once per item) at (c + 0.5) / L."""
    positions = [
        (c + 0.5) / lengths[i]
        for i, spans in enumerate(sets)
        for c in sorted({c for s, e in spans or [] for c in range(s, e)})
    ]
    return float(np.mean(positions))


def test_the_position_shift_against_counting_characters() -> None:
    lengths = [100, 40, 60, 80]
    flagged = [[(80, 95), (85, 99)], [(0, 10)], None, [(10, 20)]]
    gold: list[list[tuple[int, int]] | None] = [[(10, 30)], [(20, 30)], [(0, 5)], []]
    effect = position_shift(
        ItemSpans.from_lists(flagged), ItemSpans.from_lists(gold), lengths, ["a", "b", "c", "d"]
    )
    # Only the items where both flag something: the first two.
    both = [0, 1]
    expected = _mean_position([flagged[i] for i in both], [lengths[i] for i in both])
    expected -= _mean_position([gold[i] for i in both], [lengths[i] for i in both])
    assert effect.n == 2
    assert effect.value == pytest.approx(expected)
    assert effect.low <= effect.value <= effect.high


def test_spans_where_gold_is_flag_no_shift() -> None:
    rng = np.random.default_rng(3)
    sets = [[(int(s), int(s) + 10)] for s in rng.integers(0, 90, 50)]
    spans = ItemSpans.from_lists(sets)
    effect = position_shift(spans, spans, [100] * 50, _sources(50, 2))
    assert effect.value == pytest.approx(0.0, abs=1e-12)
    assert not effect.excludes_zero


# -- families -----------------------------------------------------------------------------


def test_the_family_table_knows_ragtruths_writers() -> None:
    writers = {
        "gpt-4-0613": "openai",
        "gpt-3.5-turbo-0613": "openai",
        "mistral-7B-instruct": "mistral",
        "llama-2-7b-chat": "meta",
        "llama-2-70b-chat": "meta",
        "claude-sonnet-4-5": "anthropic",
        "o3-mini": "openai",
        "Qwen/Qwen2.5-7B-Instruct": "alibaba",
        "gemini-2.0-flash": "google",
    }
    assert {w: family_of(w) for w in writers} == writers
    assert family_of("stub-sim-spans-r1") is None
    assert judge_family("openai", "gpt-4.1", None) == "openai"
    assert judge_family("openai", "stub-sim-score", "Meta") == "meta"
    assert judge_family("anthropic", "proxy-name", None) == "anthropic"


def test_a_panel_judge_takes_a_family_and_stores_it_only_when_given() -> None:
    given = JudgeSpec(id="a", provider="openai", model="m", prompt="data2txt_spans", family="meta")
    assert given.public_dict()["family"] == "meta"
    plain = JudgeSpec(id="a", provider="openai", model="m", prompt="data2txt_spans")
    assert "family" not in plain.public_dict()


# -- the simulator's biases ---------------------------------------------------------------


def test_the_bias_parameters_parse() -> None:
    assert parse_sim("sim-spans-r1-L0.4") == SimSpans(recall=1.0, length_bias=0.4)
    assert parse_sim("sim-score-F0.1-L0.2") == SimScore(length_bias=0.2, flip=0.1)
    assert parse_sim("sim-score-S0.3@Meta") == SimScore(self_preference=0.3, family="meta")
    with pytest.raises(ValueError, match="bad parameter"):
        parse_sim("sim-score-Q0.1")
    with pytest.raises(ValueError, match="after '@'"):
        parse_sim("sim-score-S0.3")


def _prompt(response: str) -> str:
    return f"**Generated Article:**\n{response}"


def test_a_length_biased_judge_flags_long_clean_and_passes_short_hallucinated() -> None:
    short_clean = "A short clean text that says very little at all."
    long_clean = short_clean + " It goes on and on about the place, its food and staff."
    short_bad = "Open every day until 9 pm, with free parking."
    long_bad = short_bad + " The owners also run a bakery down the street since 1990."
    gold = Gold(
        {
            short_clean: GoldEntry((), False, "llama-2-7b-chat"),
            long_clean: GoldEntry((), False, "gpt-4-0613"),
            short_bad: GoldEntry(((0, 8),), True, "gpt-4-0613"),
            long_bad: GoldEntry(((0, 8),), True, "llama-2-70b-chat"),
        }
    )

    def verdict(model: str, response: str) -> bool:
        answer = sim_answer(model, _prompt(response), gold, 0, model)
        assert answer is not None
        return bool(answer.spans) if answer.kind == "spans" else answer.score >= 0.3

    for family in ("spans", "score"):
        always = f"sim-{family}-L1"
        assert verdict(always, long_clean) and not verdict(always, short_bad)
        # The other two are judged as without the bias.
        assert not verdict(always, short_clean) and verdict(always, long_bad)
        flipped = f"sim-{family}-F1"
        assert verdict(flipped, short_clean) and not verdict(flipped, long_bad)
        # Easy on Meta's hallucination, hard on OpenAI's clean text; fair on the others.
        partial = f"sim-{family}-S1@meta"
        assert not verdict(partial, long_bad) and verdict(partial, long_clean)
        assert not verdict(partial, short_clean) and verdict(partial, short_bad)


# -- a real run through the stand-in ------------------------------------------------------


@pytest.fixture(scope="module")
def bias_run(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, BiasReport]]:
    """README: `juryflow run ... --panel examples/panel.sim-bias.yaml` on the dev sample,
    the stand-in's port in place of 8765, plus a length-biased score judge."""
    from juryflow.flows.evaluate import evaluate
    from juryflow.standin.server import StubConfig, running_stub_server
    from juryflow.standin.simulator import load_gold

    folder = tmp_path_factory.mktemp("bias")
    db = folder / "bias.duckdb"
    with (
        pytest.MonkeyPatch.context() as env,
        running_stub_server(StubConfig(gold=load_gold(DATA))) as stub,
    ):
        env.setenv("JURYFLOW_STUB_KEY", "anything")
        shipped = (REPO / "examples" / "panel.sim-bias.yaml").read_text(encoding="utf-8")
        base = stub.openai_base_url.removesuffix("/v1")
        scorer = "".join(
            f"  - {{id: {judge}, provider: openai, model: '{model}', "
            f"prompt: hallucination_score, base_url: '{stub.openai_base_url}', "
            f"api_key_env: JURYFLOW_STUB_KEY{extra}}}\n"
            for judge, model, extra in (
                ("scorer", LENGTHY_SCORE, ""),
                # The stand-in cannot see the panel: the name says the family, and so
                # does the panel, for the probe.
                ("partial", PARTIAL_SCORE, ", family: meta"),
            )
        )
        panel = folder / "panel.sim-bias.yaml"
        panel.write_text(shipped.replace("http://127.0.0.1:8765", base) + scorer, "utf-8")
        asyncio.run(
            evaluate(
                RunRequest(
                    dataset=str(DATA),
                    panel=str(panel),
                    db=str(db),
                    use_cache=False,
                    mapping={"input": "reference", "output": "response"},
                )
            )
        )
    yield db, bias_report(Store(db))


def _probe(report: BiasReport, judge: str, probe: str) -> Any:
    return next(p for p in report.probes if p.judge_id == judge and p.probe == probe)


@needs_dev
@pytest.mark.parametrize(("judge", "setting"), [("lengthy", 0.4), ("scorer", 0.3)])
def test_a_simulated_length_bias_is_recovered(
    bias_run: tuple[Path, BiasReport], judge: str, setting: float
) -> None:
    _, report = bias_run
    effect = _probe(report, judge, "length").effect
    assert effect.low < setting < effect.high
    assert effect.excludes_zero
    assert report.controlled and report.group_column == "source_id"


@needs_dev
def test_a_simulated_self_preference_is_recovered(bias_run: tuple[Path, BiasReport]) -> None:
    _, report = bias_run
    own = _probe(report, "partial", "self-preference")
    assert own.effect.low < -0.3 < own.effect.high and own.effect.excludes_zero
    # Llama 2 wrote 93 of the 186 dev responses (three of RAGTruth's six generators).
    assert "meta, 93 responses" in own.note
    length = _probe(report, "partial", "length").effect
    assert length.low < 0 < length.high


@needs_dev
def test_an_unbiased_judge_shows_no_length_effect_nor_self_preference(
    bias_run: tuple[Path, BiasReport],
) -> None:
    _, report = bias_run
    length = _probe(report, "fair", "length").effect
    assert length.low < 0 < length.high
    own = _probe(report, "fair", "self-preference")
    assert own.effect.low < 0 < own.effect.high
    # Half of RAGTruth's writers are Llama 2 models: the panel's family: meta counts them.
    assert "meta, " in own.note
    assert "family unknown" in _probe(report, "scorer", "self-preference").note


def test_span_judges_get_a_position_probe(bias_run: tuple[Path, BiasReport]) -> None:
    _, report = bias_run
    # The lengthy judge returns the gold spans where it flags a hallucinated response (a
    # gold text found twice anchors at its first occurrence, hence not exactly 0).
    exact = _probe(report, "lengthy", "position").effect
    assert exact.value == pytest.approx(0.0, abs=0.005) and not exact.excludes_zero
    assert _probe(report, "fair", "position").effect.n > 0
    assert not [p for p in report.probes if p.judge_id == "scorer" and p.probe == "position"]


def test_the_bias_command(bias_run: tuple[Path, BiasReport]) -> None:
    from juryflow.cli import app

    db, report = bias_run
    runner = CliRunner()
    result = runner.invoke(app, ["agreement", "--db", str(db), "--bias"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Bias probes against the labels" in result.output
    length = _probe(report, "lengthy", "length").effect
    row = next(
        line for line in result.output.splitlines() if "lengthy" in line and "length " in line
    )
    assert f"{length.value:+.3f}" in row and f"[{length.low:+.3f}, {length.high:+.3f}]" in row
    result = runner.invoke(app, ["agreement", "--db", str(db), "--bias", "--format", "json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert {p["probe"] for p in payload["probes"]} == {"length", "self-preference", "position"}
    unknown = _probe(report, "lengthy", "self-preference")
    assert unknown.effect.n == 0
    assert any(p["effect"]["value"] is None for p in payload["probes"])


def test_an_early_stopped_run_is_probed_on_its_audit_sample(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge left out where two others already decided would be probed on the hard items
    only: the probes keep to the random audit sample every judge judged."""
    from juryflow.cli import app
    from juryflow.flows.evaluate import evaluate
    from juryflow.standin.server import StubConfig, running_stub_server
    from juryflow.standin.simulator import load_gold
    from tests import sim_panels

    monkeypatch.setenv(KEY_ENV, "sk-bias")
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as stub:
        panel = sim_panels.sim_panel(tmp_path / "panel.yaml", stub, key_env=KEY_ENV)
        db = tmp_path / "early.duckdb"
        summary = asyncio.run(
            evaluate(
                RunRequest(
                    dataset=str(SAMPLE),
                    panel=str(panel),
                    db=str(db),
                    use_cache=False,
                    early_stop=True,
                    audit_fraction=0.5,
                )
            )
        )
    assert summary["skipped_decided"] > 0
    with Store(db).read() as con:
        row = con.execute(
            "SELECT count(*) FROM audit_items WHERE run_id = ?", [summary["run_id"]]
        ).fetchone()
    assert row is not None
    report = bias_report(Store(db))
    assert report.audit_items == row[0] and 0 < row[0] < 60
    assert all(p.effect.n <= row[0] for p in report.probes)
    result = CliRunner().invoke(
        app, ["agreement", "--db", str(db), "--bias"], env={"COLUMNS": "200"}
    )
    assert f"over the {row[0]} audit items" in result.output
