"""Intra-judge reliability in the store (issue 26, point 2): the samples read back as the
maths takes them, and the ``judge_self_agreement`` view gives the maths' numbers, on rows
written straight into ``judgment_samples`` / ``judgment_sample_spans`` (migration 14)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from juryflow.maths.agreement import ItemSpans
from juryflow.maths.samples.self_agreement import self_agreement
from juryflow.storage.reads.sample_inputs import load_samples
from juryflow.storage.store import Store

RUN = "run-samples"
Truth = dict[str, tuple[np.ndarray, np.ndarray, list[list[list[tuple[int, int]] | None]]]]


def _spans_of(rng: np.random.Generator) -> list[tuple[int, int]]:
    starts = rng.integers(0, 60, rng.integers(0, 3))
    return [(int(s), int(s + rng.integers(1, 15))) for s in starts]


def write_sampled_run(path: Path, n_items: int = 24, n_samples: int = 3, seed: int = 0) -> Truth:
    """A run with two sampled judges, a score judge and a span judge, some samples
    unscored; returns per judge (scores, verdicts, spans[sample][item]) as written."""
    rng = np.random.default_rng(seed)
    store = Store(path)
    store.migrate()
    truth: Truth = {}
    with store.write() as con:
        con.execute(
            "INSERT INTO runs (run_id, kind, suite, status, started_at, panel_name, panel, "
            "prompts, quorum, n_judges) VALUES (?, 'evaluate', 'default', 'completed', now(), "
            "'p', ?, '[]', 1, 2)",
            [RUN, json.dumps({"judges": [{"id": "scorer"}, {"id": "spotter"}]})],
        )
        # Row order differs from item-id order: the arrays follow row order.
        for i in range(n_items):
            con.execute(
                "INSERT INTO items (run_id, item_id, row_number, variables, metadata) "
                "VALUES (?, ?, ?, '{}', ?)",
                [RUN, f"item-{n_items - i:03d}", i, json.dumps({"source_id": f"s{i // 2}"})],
            )
        for judge, kind in (("scorer", "score"), ("spotter", "spans")):
            scores = np.round(rng.random((n_samples, n_items)), 1)
            scores[rng.random(scores.shape) < 0.1] = np.nan
            verdicts = np.where(np.isnan(scores), np.nan, (scores > 0.5) * 1.0)
            spans: list[list[list[tuple[int, int]] | None]] = []
            for k in range(n_samples):
                per_item: list[list[tuple[int, int]] | None] = []
                for i in range(n_items):
                    item_id = f"item-{n_items - i:03d}"
                    score = scores[k, i]
                    con.execute(
                        "INSERT INTO judgment_samples (run_id, item_id, judge_id, sample_index, "
                        "output_kind, score, verdict, cached) VALUES (?, ?, ?, ?, ?, ?, ?, false)",
                        [
                            RUN,
                            item_id,
                            judge,
                            k,
                            kind,
                            None if np.isnan(score) else float(score),
                            None if np.isnan(score) else bool(score > 0.5),
                        ],
                    )
                    found = _spans_of(rng) if kind == "spans" else []
                    for index, (start, end) in enumerate(found):
                        con.execute(
                            "INSERT INTO judgment_sample_spans VALUES (?, ?, ?, ?, ?, ?, ?, 'x')",
                            [RUN, item_id, judge, k, index, start, end],
                        )
                    # An unanchored span never counts.
                    if kind == "spans":
                        con.execute(
                            "INSERT INTO judgment_sample_spans VALUES "
                            "(?, ?, ?, ?, 99, NULL, NULL, 'lost')",
                            [RUN, item_id, judge, k],
                        )
                    per_item.append(found if kind == "spans" and not np.isnan(score) else None)
                spans.append(per_item)
            truth[judge] = (scores, verdicts, spans)
        # Every judge's own (reduced) answer, and a judge without samples.
        medians = {judge: np.nanmedian(truth[judge][0], axis=0) for judge in truth}
        medians["steady"] = np.round(rng.random(n_items), 1)
        for judge, median in medians.items():
            for i, score in enumerate(median.tolist()):
                con.execute(
                    "INSERT INTO judgments (run_id, item_id, judge_id, provider, output_kind, "
                    "score, verdict, attempts, cached) VALUES (?, ?, ?, 'openai', ?, ?, ?, 1, "
                    "false)",
                    [
                        RUN,
                        f"item-{n_items - i:03d}",
                        judge,
                        "spans" if judge == "spotter" else "score",
                        None if math.isnan(score) else score,
                        None if math.isnan(score) else score > 0.5,
                    ],
                )
    return truth


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    path = tmp_path_factory.mktemp("samples") / "samples.duckdb"
    return path, write_sampled_run(path)


def test_the_samples_read_back_in_row_order(sampled: tuple[Path, Truth]) -> None:
    path, truth = sampled
    found = {s.judge_id: s for s in load_samples(Store(path), RUN, 24)}
    assert set(found) == {"scorer", "spotter"}
    for judge, (scores, verdicts, spans) in truth.items():
        got = found[judge]
        np.testing.assert_array_equal(got.scores, scores)
        np.testing.assert_array_equal(got.verdicts, verdicts)
        if judge == "spotter":
            assert got.output_kind == "spans"
            assert [s.to_lists() for s in got.span_sets] == spans
        else:
            assert not any(s.answered.any() for s in got.span_sets)


def test_no_samples_no_rows(tmp_path: Path) -> None:
    store = Store(tmp_path / "empty.duckdb")
    store.migrate()
    assert load_samples(store, "nothing", 0) == []


def _close(a: float | None, b: float) -> bool:
    if a is None or math.isnan(b):
        return a is None and math.isnan(b)
    return abs(a - b) < 1e-9


def test_the_view_gives_the_maths_numbers(sampled: tuple[Path, Truth]) -> None:
    path, truth = sampled
    with Store(path).read() as con:
        rows = con.execute(
            "SELECT judge_id, n_samples, n_items, score_alpha, verdict_disagreement, "
            "fleiss_kappa, n_kappa_items, span_f1, n_span_items "
            "FROM judge_self_agreement WHERE run_id = ? ORDER BY judge_id",
            [RUN],
        ).fetchall()
    assert [r[0] for r in rows] == ["scorer", "spotter"]
    for row in rows:
        scores, verdicts, spans = truth[row[0]]
        sets = [ItemSpans.from_lists(s) for s in spans] if row[0] == "spotter" else None
        maths = self_agreement(scores, verdicts, [str(i) for i in range(24)], spans=sets)
        assert row[1] == 3 and row[2] == maths.n_items
        assert _close(row[3], maths.score_alpha.value)
        assert _close(row[4], maths.verdict_disagreement.value)
        assert _close(row[5], maths.verdict_kappa.value) and row[6] == maths.verdict_kappa.n
        assert _close(row[7], maths.span_f1.value)
        if row[0] == "spotter":
            assert row[8] == maths.span_f1.n and row[8] > 0
        else:
            assert row[7] is None and row[8] == 0


def test_the_agreement_report_and_command_show_it(sampled: tuple[Path, Truth]) -> None:
    from typer.testing import CliRunner

    from juryflow.analysis.agreement_report import agreement_report
    from juryflow.cli import app

    path, truth = sampled
    report = agreement_report(Store(path), RUN)
    found = {j.judge_id: j for j in report.self_agreement}
    assert set(found) == {"scorer", "spotter"}
    groups = [f"s{i // 2}" for i in range(24)]
    for judge, (scores, verdicts, spans) in truth.items():
        sets = [ItemSpans.from_lists(s) for s in spans] if judge == "spotter" else None
        others = np.vstack(
            [
                np.where(np.isnan(v), np.nan, (v > 0.5) * 1.0)
                for j, v in (
                    (j, np.nanmedian(truth[j][0], axis=0)) if j in truth else (j, None)
                    for j in report.judges
                )
                if j != judge and v is not None
            ]
            + [
                np.where(
                    np.isnan(r := np.asarray(_scores_of(path, "steady"))), np.nan, (r > 0.5) * 1.0
                )
            ]
        )
        maths = self_agreement(scores, verdicts, groups, spans=sets, others=others)
        got = found[judge]
        assert got.n_samples == 3 and got.n_items == maths.n_items
        assert _close(got.verdict_disagreement.value, maths.verdict_disagreement.value)
        assert _close(got.verdict_disagreement.low, maths.verdict_disagreement.low)
        assert _close(got.others_disagreement.value, maths.others_disagreement.value)
        assert _close(got.score_alpha.high, maths.score_alpha.high)
        assert got.as_noisy_as_others == maths.as_noisy_as_others
        assert got.kappa_with_others is not None
    # Random samples disagree with themselves as much as with anyone.
    assert found["scorer"].summary() is not None

    result = CliRunner().invoke(app, ["agreement", "--db", str(path), RUN], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    assert "Self-agreement" in result.output
    table = result.output.split("Self-agreement", 1)[1]
    row = next(line for line in table.splitlines() if line.lstrip("│ ").startswith("scorer"))
    assert found["scorer"].verdict_disagreement.show() in row
    assert "scorer disagrees with itself" in result.output
    result = CliRunner().invoke(app, ["agreement", "--db", str(path), RUN, "--format", "json"])
    payload = json.loads(result.output)
    assert {j["judge_id"] for j in payload["self_agreement"]} == {"scorer", "spotter"}


def _scores_of(path: Path, judge: str) -> list[float]:
    with Store(path).read() as con:
        rows = con.execute(
            "SELECT coalesce(j.score, 'NaN'::DOUBLE) FROM judgments j JOIN items i "
            "USING (run_id, item_id) WHERE j.run_id = ? AND j.judge_id = ? ORDER BY i.row_number",
            [RUN, judge],
        ).fetchall()
    return [float(r[0]) for r in rows]


def test_the_report_shows_self_agreement_and_an_items_samples_side_by_side(
    sampled: tuple[Path, Truth],
) -> None:
    from juryflow.analysis.agreement_report import agreement_report, disagreements
    from juryflow.report.html import render_report

    path, truth = sampled
    store = Store(path)
    found = {j.judge_id: j for j in agreement_report(store, RUN).self_agreement}
    html = render_report(store, RUN, top=2)
    section = html.split('id="self-agreement"', 1)[1].split("</table>", 1)[0]
    assert found["spotter"].span_f1.show() in section
    assert found["scorer"].verdict_kappa.show() in section
    assert "scorer disagrees with itself" in html
    items = disagreements(store, RUN, top=2)
    assert items and all(len(item.samples) == 6 for item in items)
    first = items[0]
    row = truth["scorer"][0][:, 24 - int(first.item_id.removeprefix("item-"))]
    assert [s.score for s in first.samples if s.judge_id == "scorer"] == [
        None if np.isnan(v) else v for v in row.tolist()
    ]
    assert html.count("side by side</caption>") == 2


def test_the_viewers_item_page_shows_the_samples_side_by_side(
    sampled: tuple[Path, Truth],
) -> None:
    import httpx

    from juryflow.viewer.item_model import item_href
    from juryflow.viewer.server import start_in_thread
    from juryflow.viewer.state import ViewerState

    path, truth = sampled
    running = start_in_thread(ViewerState(Store(path), "tester"))
    try:
        with httpx.Client(base_url=running.url, timeout=60) as client:
            page = client.get(item_href(RUN, "item-024"))  # row 0
    finally:
        running.stop()
    assert page.status_code == 200, page.text
    html = page.text
    assert 'id="samples-heading"' in html
    section = html.split('id="samples-heading"', 1)[1]
    for judge, (scores, _, spans) in truth.items():
        for k in range(3):
            cell = section.split(f'data-judge="{judge}" data-sample="{k}"', 1)[1].split("</td>")[0]
            score = scores[k, 0]
            assert ("unscored" in cell) if np.isnan(score) else (f"{score:.2f}" in cell)
            if judge == "spotter" and spans[k][0]:
                start, end = spans[k][0][0]
                assert f"({start}–{end})" in cell


def test_the_arrow_table_for_notebooks(sampled: tuple[Path, Truth]) -> None:
    from juryflow.analysis.agreement_report import agreement_report

    path, _ = sampled
    report = agreement_report(Store(path), RUN)
    rows = {r["judge_id"]: r for r in report.self_agreement_table().to_pylist()}
    for j in report.self_agreement:
        row = rows[j.judge_id]
        assert row["n_samples"] == 3 and row["as_noisy_as_others"] == j.as_noisy_as_others
        assert row["verdict_disagreement"] == j.verdict_disagreement.value
        assert row["score_alpha_low"] == j.score_alpha.low
    assert rows["scorer"]["span_f1"] is None


def test_an_early_stopped_run_measures_self_agreement_on_its_audit_sample(
    tmp_path: Path,
) -> None:
    """As the panel's agreement: a run that skipped judges on decided items is measured on
    the audit items every judge judged."""
    from juryflow.analysis.agreement_report import agreement_report

    path = tmp_path / "early.duckdb"
    truth = write_sampled_run(path)
    audit = [f"item-{24 - i:03d}" for i in range(0, 24, 2)]  # rows 0, 2, 4, ...
    with Store(path).write() as con:
        con.execute(
            "INSERT INTO skipped_judgments VALUES (?, 'item-001', 'steady', 'decided')", [RUN]
        )
        for item_id in audit:
            con.execute("INSERT INTO audit_items VALUES (?, ?)", [RUN, item_id])
    found = {j.judge_id: j for j in agreement_report(Store(path), RUN).self_agreement}
    scores, verdicts, spans = truth["spotter"]
    keep = np.arange(24) % 2 == 0
    maths = self_agreement(
        scores[:, keep],
        verdicts[:, keep],
        [f"s{i // 2}" for i in range(24) if keep[i]],
        spans=[ItemSpans.from_lists(s).take(keep) for s in spans],
    )
    got = found["spotter"]
    assert got.verdict_disagreement.n == maths.verdict_disagreement.n <= 12
    assert _close(got.verdict_disagreement.value, maths.verdict_disagreement.value)
    assert _close(got.span_f1.value, maths.span_f1.value)
    assert _close(got.score_alpha.low, maths.score_alpha.low)
