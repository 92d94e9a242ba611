"""Pairwise judging end to end (issue 42, points 1-2): real Prefect, real HTTP to the
stand-in's simulated pairwise judges, real DuckDB.

The README's pairwise run: the bundled sample's inputs with two candidate answers each
(``examples/ragtruth_pairs_sample.jsonl``), three simulated pairwise judges asked in both
orders (``examples/panel.sim-pairwise.yaml``). Both orders are stored as each judge's two
samples, a judge whose orders disagree is unscored ``inconsistent`` (never a tie), and the
summary shows the inconsistent share and what the panel preferred.
"""

from __future__ import annotations

import asyncio
import io
import json
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from juryflow.flows.evaluate import evaluate
from juryflow.judges.panel import load_panel
from juryflow.judges.parsing import OutputParseError, parse_output
from juryflow.judges.sampling.pairwise_judge import mapped_back, swapped
from juryflow.maths.records import Item, Judgment
from juryflow.maths.reducers import _preference
from juryflow.maths.samples.reducers import reduce_samples
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.store import Store
from juryflow.terminal.output import print_run_summary
from tests.conftest import REPO, SAMPLE

PAIRS = REPO / "examples" / "ragtruth_pairs_sample.jsonl"
PANEL = REPO / "examples" / "panel.sim-pairwise.yaml"


# -- the pieces, no server ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "score"),
    [('{"reasoning": "x", "verdict": "A"}', 0.0), ('{"verdict": "tie"}', 0.5),
     ('{"verdict": "[[B]]"}', 1.0), ('{"verdict": " b "}', 1.0)],
)  # fmt: skip
def test_a_preference_is_parsed_as_b_share_of_the_win(answer: str, score: float) -> None:
    assert parse_output(answer, "preference").score == score


def test_a_preference_that_names_no_answer_is_refused() -> None:
    with pytest.raises(OutputParseError, match="must be A, B or tie"):
        parse_output('{"verdict": "both"}', "preference")


def test_the_second_order_swaps_the_answers_and_maps_its_verdict_back() -> None:
    item = Item("i", {"input": "q", "response_a": "one", "response_b": "two",
                      "model_a": "m1", "model_b": "m2"})  # fmt: skip
    shown = swapped(item)
    assert (shown.variables["response_a"], shown.variables["response_b"]) == ("two", "one")
    assert (shown.variables["model_a"], shown.variables["model_b"]) == ("m2", "m1")
    # "A" with B shown first is the original B.
    assert mapped_back(Judgment("i", "j", "preference", 0.0)).score == 1.0
    assert mapped_back(Judgment("i", "j", "preference", 0.5)).score == 0.5


def _orders(first: float | None, second: float | None) -> Judgment:
    samples = [
        Judgment("i", "j", "preference", s, unscored_reason=None if s is not None else "broken")
        for s in (first, second)
    ]
    return reduce_samples(samples, "both_orders", "")


def test_a_verdict_counts_only_when_both_orders_give_it() -> None:
    assert _orders(1.0, 1.0).score == 1.0
    assert _orders(0.5, 0.5).score == 0.5
    flipped = _orders(0.0, 1.0)
    assert flipped.score is None
    assert flipped.unscored_reason == "inconsistent: A with A shown first, B with B shown first"
    missing = _orders(1.0, None)
    assert missing.score is None and "order unanswered" in (missing.unscored_reason or "")
    assert len(flipped.samples) == 2


def test_a_panel_is_all_pairwise_or_none(tmp_path: Path) -> None:
    panel = tmp_path / "mixed.yaml"
    panel.write_text(
        "judges:\n"
        "  - {id: p, provider: openai, model: m, prompt: pairwise_preference}\n"
        "  - {id: s, provider: openai, model: m, prompt: hallucination_score}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="a panel is all pairwise or none"):
        load_panel(panel)
    panel.write_text(
        "judges:\n  - {id: p, provider: openai, model: m, prompt: pairwise_preference, "
        "samples: 3}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="asked once in each order"):
        load_panel(panel)


def test_a_pairwise_judge_has_its_two_orders_as_samples() -> None:
    spec = load_panel(PANEL).judges[0]
    assert spec.samples == 2 and spec.output_kind == "preference"


def test_the_bundled_pairs_are_made_by_the_script(tmp_path: Path) -> None:
    out = tmp_path / "pairs.jsonl"
    runpy.run_path(str(REPO / "scripts" / "make_pairwise_sample.py"), run_name="juryflow_pairs")[
        "main"
    ]([str(out)])
    assert out.read_bytes() == PAIRS.read_bytes()


# -- a run over HTTP -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def stub() -> Any:
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as handle:
        yield handle


def _panel(tmp_path: Path, stub: StubHandle) -> Path:
    panel = tmp_path / "panel.sim-pairwise.yaml"
    base = stub.openai_base_url.removesuffix("/v1")
    panel.write_text(
        PANEL.read_text(encoding="utf-8").replace("http://127.0.0.1:8765", base),
        encoding="utf-8",
    )
    return panel


@pytest.fixture(scope="module")
def readme_run(
    stub: StubHandle, tmp_path_factory: pytest.TempPathFactory, prefect_harness: None
) -> tuple[Path, str]:
    """README: `juryflow stub-server --port 8765 --gold examples/ragtruth_data2txt_sample.jsonl
    &` then `JURYFLOW_STUB_KEY=anything juryflow run examples/ragtruth_pairs_sample.jsonl
    --panel examples/panel.sim-pairwise.yaml` (the stand-in's port in place of 8765)."""
    tmp = tmp_path_factory.mktemp("pairwise")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("JURYFLOW_STUB_KEY", "anything")
        db = tmp / "pairs.duckdb"
        request = RunRequest(dataset=str(PAIRS), panel=str(_panel(tmp, stub)), db=str(db))
        run = asyncio.run(evaluate(request))
    return db, str(run["run_id"])


def test_the_readme_pairwise_run_stores_both_orders_and_shows_the_inconsistent_share(
    readme_run: tuple[Path, str],
) -> None:
    db, run_id = readme_run
    with Store(db).read() as con:
        samples = con.execute(
            "SELECT judge_id, count(*), count(DISTINCT item_id), min(sample_index), "
            "max(sample_index) FROM judgment_samples WHERE run_id = ? GROUP BY judge_id "
            "ORDER BY judge_id",
            [run_id],
        ).fetchall()
        judged = dict(
            con.execute(
                "SELECT judge_id, count(*) FILTER (WHERE unscored_reason LIKE 'inconsistent:%') "
                "FROM judgments WHERE run_id = ? GROUP BY judge_id",
                [run_id],
            ).fetchall()
        )
        kinds = con.execute(
            "SELECT DISTINCT output_kind FROM judgments WHERE run_id = ?", [run_id]
        ).fetchall()
    # Every judge, every one of the 30 pairs, in both orders.
    assert samples == [(j, 60, 30, 0, 1) for j in ("coin", "first-pick", "steady")]
    assert kinds == [("preference",)]
    # A judge with no position bias never flips at accuracy 1 ... the steady judge errs
    # (accuracy 0.9) independently per order, so it flips less often than first-pick.
    assert judged["first-pick"] > judged["steady"]
    summary = Store(db).run_summary(run_id)
    assert summary["preference_judgments"] == 90
    assert summary["inconsistent"] == sum(judged.values())
    console = Console(file=io.StringIO(), width=200)
    print_run_summary(console, {**summary, "run_id": run_id, "db": str(db)})
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "inconsistent (orders disagree)" in text and "panel prefers" in text
    assert "hallucination rate" not in text
    from juryflow.analysis.agreement_report import agreement_report

    report = agreement_report(Store(db), run_id)
    # The items' `preferred` column is the human label: every judge has a κ with it, and
    # with the other judges (three classes, over the items where both are consistent).
    assert [p.judge_id for p in report.position] == ["coin", "first-pick", "steady"]
    assert all(p.human_kappa is not None and p.kappa_with_judges is not None
               for p in report.position)  # fmt: skip
    assert (
        report.preference is not None
        and report.preference.items + (report.preference.without_consensus) == 30
    )
    assert len(report.preference.strengths) == 6


@pytest.mark.usefixtures("prefect_harness")
def test_agreement_recovers_each_judges_simulated_flip_rate(
    stub: StubHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42's first check: judges right on every verdict, one with a position bias P of
    0.3 and one with none. A pair's orders disagree with chance P when one answer is better
    and P(2 - P) when they tie (standin/pairwise_sim.py), so over the 30 pairs, of which
    t are ties, the expected flip rate is P(1 + t(1 - P)); `juryflow agreement`'s interval
    holds it, and the unbiased judge never flips."""
    from juryflow.analysis.agreement_report import agreement_report

    monkeypatch.setenv("JURYFLOW_STUB_KEY", "anything")
    url = stub.openai_base_url
    panel = tmp_path / "flips.yaml"
    panel.write_text(
        "name: flips\njudges:\n"
        + "".join(
            f"  - {{id: {name}, provider: openai, model: {model}, prompt: pairwise_preference, "
            f"base_url: '{url}', api_key_env: JURYFLOW_STUB_KEY}}\n"
            for name, model in (("biased", "stub-sim-pair-P0.3"), ("fair", "stub-sim-pair"))
        ),
        encoding="utf-8",
    )
    db = tmp_path / "flips.duckdb"
    run = asyncio.run(evaluate(RunRequest(dataset=str(PAIRS), panel=str(panel), db=str(db))))
    report = agreement_report(Store(db), str(run["run_id"]))
    by_judge = {p.judge_id: p.flip_rate for p in report.position}
    ties = sum('"preferred": "tie"' in line for line in PAIRS.read_text().splitlines())
    p = 0.3
    expected = p * (1 + ties / 30 * (1 - p))
    biased = by_judge["biased"]
    assert biased.low is not None and biased.high is not None
    assert biased.low <= expected <= biased.high, (expected, biased)
    assert by_judge["fair"].count == 0 and by_judge["fair"].of == 30


@pytest.mark.browser
def test_an_items_two_answers_stand_side_by_side_with_every_judges_two_orders(
    readme_run: tuple[Path, str], tmp_path: Path
) -> None:
    """The viewer's item page of a pairwise run, in a real browser: answers A and B side by
    side, and per judge its verdict with A shown first, with B shown first, and the two
    made one (or ``inconsistent``)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from juryflow.viewer.server import start_in_thread
    from juryflow.viewer.state import ViewerState
    from tests.headless_chromium import CHROMEDRIVER, CHROMIUM, headless_chromium

    if not CHROMEDRIVER.exists() or CHROMIUM is None:
        pytest.skip("needs Debian's chromium and chromium-driver")
    db, run_id = readme_run
    with Store(db).read() as con:
        row = con.execute(
            "SELECT item_id FROM judgments WHERE run_id = ? AND unscored_reason LIKE "
            "'inconsistent:%' ORDER BY item_id LIMIT 1",
            [run_id],
        ).fetchone()
    assert row is not None
    running = start_in_thread(ViewerState(Store(db), "pairwise-tester"))
    try:
        with headless_chromium(tmp_path / "chromium", "1400,1600") as browser:
            browser.get(f"{running.url.rstrip('/')}/runs/{run_id}/item?id={row[0]}")
            WebDriverWait(browser, 20).until(ec.presence_of_element_located((By.ID, "pairwise")))
            a, b = browser.execute_script(
                "return ['response_a', 'response_b'].map(n => document.querySelector("
                "`#pairwise pre[data-answer=${n}]`).getBoundingClientRect().toJSON());"
            )
            judges = browser.find_elements(By.CSS_SELECTOR, "#pairwise tr[data-judge]")
            cells = [[c.text for c in j.find_elements(By.CSS_SELECTOR, "td")] for j in judges]
            # The run's page: each judge in both orders, B against A, the candidates.
            browser.get(f"{running.url.rstrip('/')}/runs/{run_id}")
            WebDriverWait(browser, 20).until(
                ec.presence_of_element_located((By.ID, "head-to-head-facts"))
            )
            positions = browser.find_elements(By.CSS_SELECTOR, "#positions tr")
            facts = browser.find_element(By.ID, "head-to-head-facts").text
            strengths = browser.find_elements(By.CSS_SELECTOR, "#strengths tr")
    finally:
        running.stop()
    assert b["left"] >= a["right"] and abs(a["top"] - b["top"]) < 2, (a, b)
    assert len(cells) == 3 and all(len(c) == 3 for c in cells)
    assert any(c[2] == "inconsistent" for c in cells), cells
    assert len(positions) == 1 + 3 and "B's win share" in facts and len(strengths) == 1 + 6


# -- the consensus rule -------------------------------------------------------------------

verdict_lists = st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=9)


@given(verdict_lists, st.data())
@settings(deadline=None, max_examples=200)
def test_the_preference_rule_mirrors_when_a_and_b_swap(
    verdicts: list[float], data: st.DataObject
) -> None:
    """Swapping the answers turns every verdict v into 1 - v: the panel's preference turns
    the same way, whatever the weights; and it is always one of A, tie, B."""
    weights = np.asarray(
        data.draw(st.lists(st.floats(0.1, 5.0), min_size=len(verdicts), max_size=len(verdicts)))
    )
    scores = np.asarray(verdicts)
    found = _preference(scores, weights, None)
    assert found in (0.0, 0.5, 1.0)
    assert _preference(1.0 - scores, weights, None) == 1.0 - found


@given(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5))
@settings(deadline=None, max_examples=200)
def test_the_preference_rule_is_the_plurality_and_a_draw_is_a_tie(a: int, tie: int, b: int) -> None:
    scores = np.asarray([0.0] * a + [0.5] * tie + [1.0] * b)
    if not scores.size:
        return
    found = _preference(scores, np.ones(scores.size), None)
    counts = {0.0: a, 0.5: tie, 1.0: b}
    top = max(counts.values())
    winners = [v for v, n in counts.items() if n == top]
    assert found == (winners[0] if len(winners) == 1 else 0.5)


def test_a_prompt_file_declaring_a_preference_makes_a_pairwise_judge(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text(
        'Which answer is better, A or B? Reply with JSON {"verdict": "A" | "B" | "tie"}.'
        "\n{{-- per item --}}\n{{ input }}\n{{ response_a }}\n{{ response_b }}\n",
        encoding="utf-8",
    )
    panel = tmp_path / "panel.yaml"
    panel.write_text(
        "judges:\n  - {id: mine, provider: openai, model: m, prompt: ./mine.txt, "
        "output: preference}\n",
        encoding="utf-8",
    )
    spec = load_panel(panel).judges[0]
    assert spec.samples == 2 and spec.output_kind == "preference"
    assert load_panel(panel).consensus_rule().score.name == "preference"


@pytest.mark.usefixtures("prefect_harness")
def test_early_stopping_a_pairwise_panel_is_exact_and_never_skips_an_order(
    stub: StubHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readme_run: tuple[Path, str]
) -> None:
    """With --early-stop a judge is left out only where no answer of it (A, tie or B, or
    none) could change the item's result; a judge called is asked in both orders."""
    monkeypatch.setenv("JURYFLOW_STUB_KEY", "anything")
    full_db, full_id = readme_run
    db = tmp_path / "early.duckdb"
    request = RunRequest(
        dataset=str(PAIRS),
        panel=str(_panel(tmp_path, stub)),
        db=str(db),
        early_stop=True,
        audit_fraction=0.0,
        use_cache=False,
    )
    run_id = str(asyncio.run(evaluate(request))["run_id"])
    decided = (
        "SELECT item_id, status, score, hallucinated FROM consensus WHERE run_id = ? "
        "ORDER BY item_id"
    )
    with Store(full_db).read() as con:
        full = con.execute(decided, [full_id]).fetchall()
    with Store(db).read() as con:
        early = con.execute(decided, [run_id]).fetchall()
        judged, orders = con.execute(
            "SELECT (SELECT count(*) FROM judgments WHERE run_id = $run), "
            "(SELECT count(*) FROM judgment_samples WHERE run_id = $run)",
            {"run": run_id},
        ).fetchone() or (0, 0)
    assert early == full
    assert judged < 90 and orders == 2 * judged


def test_the_report_of_a_pairwise_run_shows_both_orders_and_the_preference(
    readme_run: tuple[Path, str],
) -> None:
    from juryflow.report.html import render_report

    db, run_id = readme_run
    page = render_report(Store(db), run_id)
    for anchor in ('id="pairwise"', 'id="positions"', 'id="head-to-head-facts"', 'id="strengths"'):
        assert anchor in page, anchor
    assert "B&#39;s win share" in page or "B's win share" in page


def test_disagreements_of_a_pairwise_run_say_which_answer_each_judge_preferred(
    readme_run: tuple[Path, str],
) -> None:
    from typer.testing import CliRunner

    from juryflow.cli import app

    db, run_id = readme_run
    shown = CliRunner().invoke(
        app, ["disagreements", run_id, "--db", str(db), "--top", "30"], env={"COLUMNS": "160"}
    )
    assert shown.exit_code == 0, shown.output
    # A preference is neither hallucinated nor clean: the words are the summary's.
    assert "hallucinated" not in shown.output and " clean" not in shown.output
    assert "A better" in shown.output and "B better" in shown.output
    assert "rule " in shown.output and "median " not in shown.output


def test_dawid_skene_is_a_pairwise_panels_stored_consensus_fitted_over_the_run(
    readme_run: tuple[Path, str],
) -> None:
    """`juryflow reaggregate RUN --consensus score=dawid_skene`: three-class Dawid–Skene
    fitted over the run's consistent verdicts, stored with the rule, applied per item; the
    coin-flipping judge comes out near chance and the steady one near the diagonal."""
    from juryflow.flows.reaggregate import reaggregate
    from juryflow.maths.reducers import ConsensusRule

    db, run_id = readme_run
    new = asyncio.run(reaggregate(run_id=run_id, db=str(db), consensus=["score=dawid_skene"]))
    store = Store(db)
    record = store.get_run(new["run_id"])
    assert record is not None and record.consensus is not None
    rule = ConsensusRule.from_dict(record.consensus)
    assert rule.score.name == "dawid_skene" and rule.score_fit is not None
    accuracy = {
        judge: float(np.trace(np.asarray(table))) / 3
        for judge, table in rule.score_fit.confusion.items()
    }
    assert accuracy["steady"] > accuracy["coin"]
    with store.read() as con:
        rows = con.execute(
            "SELECT c.item_id, c.score, list(j.judge_id ORDER BY j.judge_id), "
            "list(j.score ORDER BY j.judge_id) FROM consensus c JOIN judgments j "
            "ON j.run_id = c.run_id AND j.item_id = c.item_id AND j.score IS NOT NULL "
            "WHERE c.run_id = ? AND c.status = 'ok' GROUP BY c.item_id, c.score",
            [new["run_id"]],
        ).fetchall()
    assert rows
    for _, score, judges, scores in rows:
        assert score == rule.score_fit.decide(judges, np.asarray(scores), np.ones(len(judges)))


def test_the_viewers_comparison_of_two_runs_shows_their_head_to_head(
    readme_run: tuple[Path, str], stub: StubHandle, tmp_path: Path
) -> None:
    """The viewer's comparison of runs X and Y shows the pairwise run that judged their
    pairs file (`juryflow regression --pairwise` writes `X-vs-Y.jsonl`): here the bundled
    pairs, named as the pairs of the README run against itself."""
    import httpx

    from juryflow.planning.head_to_head_pairs import pairs_file_name
    from juryflow.viewer.server import start_in_thread
    from juryflow.viewer.state import ViewerState

    db, run_id = readme_run
    pairs = tmp_path / pairs_file_name(run_id, run_id)
    pairs.write_text(PAIRS.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("JURYFLOW_STUB_KEY", "anything")
        request = RunRequest(dataset=str(pairs), panel=str(_panel(tmp_path, stub)), db=str(db))
        judged = asyncio.run(evaluate(request))
    running = start_in_thread(ViewerState(Store(db), "pairwise-tester"))
    try:
        page = httpx.get(f"{running.url.rstrip('/')}/compare?a={run_id}&b={run_id}", timeout=30)
    finally:
        running.stop()
    assert page.status_code == 200, page.text
    assert 'id="head-to-head-figures"' in page.text and judged["run_id"] in page.text
    assert "B&#39;s win share" in page.text or "B's win share" in page.text


def test_the_pairwise_sql_views_give_the_agreement_reports_figures(
    readme_run: tuple[Path, str],
) -> None:
    """judge_position_flips, pairwise_agreement and pairwise_panel_size (`juryflow sql`)
    against the numpy figures `juryflow agreement` shows for the same run."""
    from juryflow.analysis.agreement_report import agreement_report

    db, run_id = readme_run
    store = Store(db)
    report = agreement_report(store, run_id)
    with store.read() as con:
        flips = {
            row[0]: row[1:]
            for row in con.execute(
                "SELECT judge_id, n_pairs, n_flips, flip_rate, first_shown_picks, n_decided "
                "FROM judge_position_flips WHERE run_id = ?",
                [run_id],
            ).fetchall()
        }
        pairs = con.execute(
            "SELECT judge_id, other, other_kind, n_items, cohen_kappa FROM pairwise_agreement "
            "WHERE run_id = ?",
            [run_id],
        ).fetchall()
        size = con.execute(
            "SELECT effective_panel_size FROM pairwise_panel_size WHERE run_id = ?", [run_id]
        ).fetchall()
    for position in report.position:
        n_pairs, n_flips, rate, picks, decided = flips[position.judge_id]
        assert (n_flips, n_pairs) == (position.flip_rate.count, position.flip_rate.of)
        assert rate == pytest.approx(position.flip_rate.value)
        assert (picks, decided) == (position.first_shown.count, position.first_shown.of)
        human = [p for p in pairs if p[0] == position.judge_id and p[2] == "human"]
        assert human[0][3] == position.human_items
        assert human[0][4] == pytest.approx(position.human_kappa)
        with_judges = [
            p[4] for p in pairs
            if p[2] == "judge" and position.judge_id in (p[0], p[1]) and p[4] is not None
        ]  # fmt: skip
        assert np.mean(with_judges) == pytest.approx(position.kappa_with_judges)
    # Too few items where every judge is consistent and a human labelled: n/a in both.
    assert report.preference is not None and report.preference.effective_panel_size is None
    assert size == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_pairwise_panel_size_view_is_the_numpy_effective_panel_size(
    seed: int, tmp_path: Path
) -> None:
    """Four pairwise judges, two of them copying each other's errors, some verdicts
    inconsistent (unscored) and some items unlabelled: the view's effective panel size is
    :func:`juryflow.maths.agreement.error_correlation_report`'s."""
    from juryflow.maths.agreement import error_correlation_report
    from juryflow.maths.records import unscored
    from tests.test_views import build_store

    rng = np.random.default_rng(seed)
    n_items, judges = 40, ["p", "q", "r", "s"]
    truth = rng.choice([0.0, 0.5, 1.0], size=n_items)
    said = np.where(
        rng.random((4, n_items)) < 0.7, truth, rng.choice([0.0, 0.5, 1.0], (4, n_items))
    )
    said[1] = np.where(rng.random(n_items) < 0.8, said[0], said[1])  # q copies p mostly
    missing = rng.random((4, n_items)) < 0.1
    judgments = [
        unscored(f"i{i}", judge, "preference", "inconsistent: A then B")
        if missing[j, i]
        else Judgment(f"i{i}", judge, "preference", float(said[j, i]))
        for i in range(n_items)
        for j, judge in enumerate(judges)
    ]
    store = build_store(tmp_path / "pairs.duckdb", judges, judgments)
    labels = {f"i{i}": ("A", "B", "tie")[[0.0, 1.0, 0.5].index(truth[i])] for i in range(n_items)}
    labelled = [i for i in range(n_items) if i % 7 != 3]
    with store.write() as con:
        for i in labelled:
            con.execute(
                "UPDATE items SET metadata = ? WHERE item_id = ?",
                [json.dumps({"preferred": labels[f"i{i}"]}), f"i{i}"],
            )
    wrong = np.full((4, n_items), np.nan)
    for i in labelled:
        known = ~missing[:, i]
        wrong[known, i] = (said[known, i] != truth[i]).astype(np.float64)
    expected = error_correlation_report(wrong, np.zeros(n_items)).effective_size
    with store.read() as con:
        found = con.execute("SELECT effective_panel_size FROM pairwise_panel_size").fetchall()
    assert np.isfinite(expected) and found == [(pytest.approx(expected),)]


def test_dawid_skene_scores_are_refused_for_a_panel_that_is_not_pairwise(tmp_path: Path) -> None:
    from juryflow.judges.panel import PanelError

    panel = tmp_path / "panel.yaml"
    panel.write_text(
        "judges:\n  - {id: a, provider: offline, detector: numbers}\n"
        "consensus: {score: dawid_skene}\n"
    )
    with pytest.raises(PanelError, match="pairwise judges' A / tie / B verdicts"):
        load_panel(panel)


@given(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=6), st.data())
@settings(deadline=None, max_examples=100)
def test_the_dawid_skene_score_rule_mirrors_when_a_and_b_swap(
    verdicts: list[float], data: st.DataObject
) -> None:
    from juryflow.maths.reducers import PreferenceFit

    judges = [f"j{k}" for k in range(len(verdicts))]
    rows = st.lists(st.floats(0.01, 1.0), min_size=3, max_size=3)
    tables = {j: [data.draw(rows) for _ in range(3)] for j in judges}
    confusion = {j: tuple(tuple(p / sum(r) for p in r) for r in t) for j, t in tables.items()}
    prior = data.draw(rows)
    fit = PreferenceFit(confusion, tuple(p / sum(prior) for p in prior))
    swap = [1, 0, 2]  # A <-> B, tie stays
    mirrored = PreferenceFit(
        {j: tuple(tuple(t[swap[k]][swap[m]] for m in range(3)) for k in range(3))
         for j, t in confusion.items()},
        tuple(fit.prior[swap[k]] for k in range(3)),
    )  # fmt: skip
    scores = np.asarray(verdicts)
    weights = np.ones(len(judges))
    assert mirrored.decide(judges, 1.0 - scores, weights) == 1.0 - fit.decide(
        judges, scores, weights
    )


def test_the_rubric_slot_takes_an_items_own_rubric_else_the_prompts(tmp_path: Path) -> None:
    """`rubric` is optional: a dataset without the column, or a row with an empty cell, is
    judged by the prompt's default rubric; a row's own rubric replaces it."""
    from juryflow.prompts.loader import load_template
    from juryflow.storage.datasets import read_items

    rows = [
        {"id": "1", "input": "q", "response_a": "a", "response_b": "b", "rubric": "Be brief."},
        {"id": "2", "input": "q", "response_a": "a", "response_b": "b", "rubric": ""},
    ]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    template = load_template("pairwise_preference")
    items = list(read_items(data, template.variables))
    assert [i.variables.get("rubric") for i in items] == ["Be brief.", None]  # type: ignore[union-attr]
    own, default = (template.render(i.variables) for i in items)  # type: ignore[union-attr]
    assert "<rubric>\nBe brief.\n</rubric>" in own
    assert dict(template.defaults)["rubric"] in default
    no_column = tmp_path / "plain.jsonl"
    no_column.write_text(json.dumps({k: v for k, v in rows[0].items() if k != "rubric"}) + "\n")
    assert "rubric" not in next(iter(read_items(no_column, template.variables))).variables  # type: ignore[union-attr]
