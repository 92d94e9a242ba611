"""Regressions decided head to head (issue 42, point 4).

- The check on simulated judges: on the RAGTruth data-to-text dev sample, three simulated
  pairwise judges of the stand-in (one with a position bias) judge each item's baseline
  answer against the candidate's in both orders, the panel's preference is the plurality of
  the consistent verdicts, and the head-to-head flags the candidate when its win share's
  interval (sources resampled) lies below 50 %. An A/A run (the baseline against itself) is
  flagged in at most 1 of 20 stand-in seeds; a candidate worse on 20 % of the items is
  flagged in every one.
- End to end: `juryflow regression --pairwise PANEL` on the bundled sample, a candidate
  whose answers are worse on a fifth of the items: the head-to-head is in the stored
  comparison, its line is printed, and the command exits 1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.pairwise.head_to_head import head_to_head, regressed
from juryflow.maths.pairwise.records import MISSING, TIE, A, B
from juryflow.maths.reducers import _preference
from juryflow.planning.head_to_head_pairs import head_to_head_rows, pair_input
from juryflow.planning.run_request import RunRequest
from juryflow.prompts.loader import load_template
from juryflow.standin.pairwise_sim import SimPair, pair_verdict
from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE, SHARED_DATA

JUDGES = (
    ("steady", SimPair(accuracy=0.9)),
    ("first-pick", SimPair(accuracy=0.9, position_bias=0.3)),
    ("coin", SimPair(accuracy=0.6, position_bias=0.1)),
)
SCORE = {"A": 0.0, "tie": 0.5, "B": 1.0}


def test_pairs_put_the_baseline_first_and_keep_what_the_judges_saw() -> None:
    baseline = {"1": {"reference": "r1", "response": "old"}, "2": {"reference": "r2"}}
    candidate = {"1": {"reference": "r1", "response": "new"}, "3": {"response": "x"}}
    rows = head_to_head_rows(baseline, candidate, ("base", "cand"), {"1": "src"})
    assert rows == [
        {"id": "1", "source_id": "src", "input": "r1", "response_a": "old",
         "response_b": "new", "model_a": "base", "model_b": "cand"}
    ]  # fmt: skip
    assert pair_input({"a": "1", "b": "2", "response": "x"}, "response") == "a: 1\n\nb: 2"


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _labelled_chars(row: dict[str, Any]) -> int:
    return len({c for label in row["labels"] for c in range(label["start"], label["end"])})


def _worse_on(rows: list[dict[str, Any]], share: float, seed: int) -> list[str]:
    """Each item's answer, a ``share`` of them (seeded, among those not already their
    source's worst) swapped for the worst-labelled answer of the same source."""
    worst: dict[str, dict[str, Any]] = {}
    for row in rows:
        known = worst.get(row["source_id"])
        if known is None or _labelled_chars(row) > _labelled_chars(known):
            worst[row["source_id"]] = row
    can = [
        k for k, r in enumerate(rows)
        if _labelled_chars(worst[r["source_id"]]) > _labelled_chars(r)
    ]  # fmt: skip
    picked = set(np.random.default_rng(seed).choice(can, round(share * len(rows)), replace=False))
    return [
        worst[r["source_id"]]["response"] if k in picked else r["response"]
        for k, r in enumerate(rows)
    ]


def _flagged(rows: list[dict[str, Any]], candidate: list[str], seed: int) -> bool:
    """The stand-in's judges (server seed ``seed``) on every pair in both orders, the
    panel's plurality of consistent verdicts, and the head-to-head's flag."""
    template = load_template("pairwise_preference")
    gold = load_gold(SHARED_DATA / "data2txt_dev.jsonl")
    codes = np.full(len(rows), MISSING, dtype=np.int8)
    for k, (row, new) in enumerate(zip(rows, candidate, strict=True)):
        old = row["response"]
        # Only the pair's own labels: the simulator looks them up in the prompt.
        pair_gold = {old: gold[old], new: gold[new]}
        shown = {"input": row["reference"], "response_a": old, "response_b": new}
        swapped = {**shown, "response_a": new, "response_b": old}
        prompts = (template.render(shown), template.render(swapped))
        consistent = []
        for name, params in JUDGES:
            model = f"stub-sim-pair-{name}"
            first, second = (pair_verdict(params, p, pair_gold, seed, model) for p in prompts)
            if first is None or second is None:
                continue
            mapped = {"A": "B", "B": "A", "tie": "tie"}[second]
            if first == mapped:
                consistent.append(SCORE[first])
        if consistent:
            score = _preference(np.asarray(consistent), np.ones(len(consistent)), None)
            codes[k] = {0.0: A, 0.5: TIE, 1.0: B}[score]
    groups = np.asarray([r["source_id"] for r in rows], dtype=object)
    return regressed(head_to_head(codes, groups=groups, seed=seed))


@pytest.fixture(scope="module")
def dev_rows() -> list[dict[str, Any]]:
    path = SHARED_DATA / "data2txt_dev.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not here (it ships in shared/ beside the checkout)")
    return _rows(path)


def test_an_aa_head_to_head_is_flagged_in_at_most_1_of_20_seeds(
    dev_rows: list[dict[str, Any]],
) -> None:
    same = [r["response"] for r in dev_rows]
    flagged = sum(_flagged(dev_rows, same, seed) for seed in range(20))
    assert flagged <= 1, flagged


def test_a_candidate_worse_on_a_fifth_of_the_items_is_flagged_in_every_seed(
    dev_rows: list[dict[str, Any]],
) -> None:
    missed = [
        seed for seed in range(20) if not _flagged(dev_rows, _worse_on(dev_rows, 0.2, seed), seed)
    ]
    assert not missed, missed


@pytest.mark.slow  # about 70 s: two regressions, an A/A re-judge and two pairwise runs
@pytest.mark.usefixtures("prefect_harness")
def test_regression_with_a_pairwise_panel_flags_worse_answers_head_to_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.flows.regression import regression

    rows = _rows(SAMPLE)
    candidate = tmp_path / "candidate.jsonl"
    candidate.write_text(
        "".join(
            json.dumps({**row, "response": new}) + "\n"
            for row, new in zip(rows, _worse_on(rows, 0.2, 0), strict=True)
        ),
        encoding="utf-8",
    )
    db = tmp_path / "h2h.duckdb"
    monkeypatch.setenv("JURYFLOW_STUB_KEY", "anything")
    gold = load_gold(SAMPLE)
    with running_stub_server(StubConfig(gold=gold)) as stub:
        # The stand-in must know the candidate's answers too: they are the sample's own.
        pairwise = tmp_path / "pairwise.yaml"
        base = stub.openai_base_url.removesuffix("/v1")
        shipped = (REPO / "examples" / "panel.sim-pairwise.yaml").read_text(encoding="utf-8")
        pairwise.write_text(shipped.replace("http://127.0.0.1:8765", base), encoding="utf-8")
        first: Any = asyncio.run(
            cast(Any, regression(RunRequest(dataset=str(SAMPLE), db=str(db), suite="h2h"),
                                 return_state=True))
        )  # fmt: skip
        assert first.is_completed() and "is the baseline" in (first.message or "")
        result = CliRunner().invoke(
            app,
            ["regression", str(candidate), "--db", str(db), "--suite", "h2h", "--pairwise",
             str(pairwise), "--noise-floor", "--noise-sample", "10"],
            env={"COLUMNS": "250"},
        )  # fmt: skip
    print(result.output)
    assert result.exit_code == 1, result.output
    assert "head to head (pairwise panel, both orders)" in result.output
    assert "the new answers' win share against the baseline's" in result.output
    with Store(db).read() as con:
        suites = dict(con.execute("SELECT suite, count(*) FROM runs GROUP BY suite").fetchall())
    # The baseline, the new run, the A/A re-judge, and the two head-to-head runs (A/A, real).
    assert suites.get("h2h~head-to-head") == 2, suites


def test_bradley_terry_ranks_three_candidate_models_apart_on_the_dev_sample(
    dev_rows: list[dict[str, Any]],
) -> None:
    """Three of the dev sample's writers, every two of them compared on each of the 31
    sources by the three simulated judges in both orders (93 pairs): the Bradley–Terry fit
    with a position term ranks them as their human labels do (fewer hallucinated
    characters per source), with intervals (sources resampled) that do not overlap."""
    from juryflow.maths.pairwise.bradley_terry import comparisons, fit_bradley_terry
    from juryflow.maths.pairwise.records import parse_verdicts

    models = ("gpt-4-0613", "mistral-7B-instruct", "llama-2-13b-chat")
    by_source: dict[str, dict[str, dict[str, Any]]] = {}
    for row in dev_rows:
        by_source.setdefault(row["source_id"], {})[row["model"]] = row
    template = load_template("pairwise_preference")
    gold = load_gold(SHARED_DATA / "data2txt_dev.jsonl")
    model_a, model_b, groups = [], [], []
    first: list[list[str | None]] = [[] for _ in JUDGES]
    second: list[list[str | None]] = [[] for _ in JUDGES]
    for source, written in sorted(by_source.items()):
        for i, j in ((0, 1), (1, 2), (0, 2)):
            a, b = written[models[i]], written[models[j]]
            pair_gold = {a["response"]: gold[a["response"]], b["response"]: gold[b["response"]]}
            shown = {"input": a["reference"], "response_a": a["response"],
                     "response_b": b["response"]}  # fmt: skip
            swapped = {**shown, "response_a": b["response"], "response_b": a["response"]}
            for k, (name, params) in enumerate(JUDGES):
                model = f"stub-sim-pair-{name}"
                first[k].append(pair_verdict(params, template.render(shown), pair_gold, 0, model))
                second[k].append(
                    pair_verdict(params, template.render(swapped), pair_gold, 0, model)
                )
            model_a.append(i)
            model_b.append(j)
            groups.append(source)
    found = comparisons(
        model_a,
        model_b,
        np.stack([parse_verdicts(v) for v in first]),
        np.stack([parse_verdicts(v) for v in second]),
        n_models=3,
    )
    fit = fit_bradley_terry(found, groups=np.asarray(groups, dtype=object))
    assert fit.ranking().tolist() == [0, 1, 2]
    assert fit.strengths_low[0] > fit.strengths_high[1], (fit.strengths_low, fit.strengths_high)
    assert fit.strengths_low[1] > fit.strengths_high[2], (fit.strengths_low, fit.strengths_high)


def test_a_pairwise_panel_of_other_judges_is_refused_before_any_pair_is_judged(
    tmp_path: Path,
) -> None:
    from juryflow.flows.head_to_head import _judge_pairs

    store = Store(tmp_path / "s.duckdb")
    offline = REPO / "examples" / "panel.offline.yaml"
    with pytest.raises(ValueError, match="has judges that are not pairwise"):
        asyncio.run(_judge_pairs(store, RunRequest(), "a", "b", str(offline), "suite"))
    assert not (tmp_path / "s.pairs").exists()
