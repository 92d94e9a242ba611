"""Simulated judges of known quality: the stand-in answers from RAGTruth gold labels.

Every judge here is an LLMJudge built by the factory, calling the stand-in through the
official SDKs over real HTTP, so what is measured is what a panel run would store.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.ratelimit import reset_limiters
from juryflow.maths.gold import span_prf
from juryflow.maths.records import Item, Judgment
from juryflow.prompts.loader import load_template
from juryflow.standin.server import StubConfig, StubHandle, parse_model, running_stub_server
from juryflow.standin.simulator import (
    Gold,
    GoldEntry,
    SimScore,
    SimSpans,
    load_gold,
    parse_sim,
    response_in,
)
from juryflow.storage.datasets import read_items

RAGTRUTH = Path(__file__).resolve().parents[2] / "shared" / "data" / "ragtruth"
DATA2TXT = RAGTRUTH / "data2txt_dev.jsonl"
KEY_ENV = "JURYFLOW_SIM_TEST_KEY"
SPANS_PROMPT = "data2txt_spans"
SCORE_PROMPT = "hallucination_score"
PROVIDERS = ("anthropic", "openai")
needs_ragtruth = pytest.mark.skipif(
    not DATA2TXT.is_file(), reason=f"RAGTruth dev split not found at {RAGTRUTH}"
)


# --- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_limiters(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(KEY_ENV, "sk-sim-test")
    reset_limiters()
    yield
    reset_limiters()


@pytest.fixture(scope="module")
def gold() -> Gold:
    if not DATA2TXT.is_file():
        pytest.skip(f"RAGTruth dev split not found at {RAGTRUTH}")
    return load_gold(DATA2TXT)


@pytest.fixture(scope="module")
def stub(gold: Gold) -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(gold=gold)) as handle:
        yield handle


@pytest.fixture(scope="module")
def items() -> list[Item]:
    if not DATA2TXT.is_file():
        pytest.skip(f"RAGTruth dev split not found at {RAGTRUTH}")
    rows = read_items(DATA2TXT, ("reference", "response", "input", "output"))
    return [row for row in rows if isinstance(row, Item)]


def make_judge(stub: StubHandle, model: str, prompt: str, provider: str = "openai") -> LLMJudge:
    spec = JudgeSpec(
        id=f"sim-{provider}",
        provider=provider,  # type: ignore[arg-type]
        model=model,
        prompt=prompt,
        base_url=stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url,
        api_key_env=KEY_ENV,
        timeout=5.0,
        max_attempts=2,
        max_concurrency=32,
    )
    judge = build_judge(spec)
    assert isinstance(judge, LLMJudge)
    judge.base_delay = 0.001
    return judge


async def judge_all(
    stub: StubHandle, model: str, items: Sequence[Item], prompt: str = SPANS_PROMPT, **kw: Any
) -> list[Judgment]:
    judge = make_judge(stub, model, prompt, **kw)
    try:
        return list(await asyncio.gather(*(judge.judge(item) for item in items)))
    finally:
        await judge.aclose()


def voting(judgment: Judgment) -> list[tuple[int, int]]:
    """Offsets that would vote in a consensus: anchored, and not an ambiguous guess."""
    return [
        (s.char_start, s.char_end)
        for s in judgment.spans
        if s.char_start is not None and s.char_end is not None and s.match != "ambiguous"
    ]


def gold_spans(gold: Gold, item: Item) -> list[tuple[int, int]]:
    return list(gold[item.text("response")].spans)


def unambiguous(item: Item) -> bool:
    """Every gold span's text occurs once, so an exact copy anchors to the labelled place."""
    response = item.text("response")
    assert item.gold is not None
    return all(response.count(response[s:e]) == 1 for s, e in item.gold.spans)


# --- the model-name grammar ----------------------------------------------------------------


def test_parse_sim_grammar() -> None:
    assert parse_sim("sim-spans") == SimSpans()
    assert parse_sim("sim-spans-r0.8-f0.1-j.2-n0.3-o1-b0") == SimSpans(
        recall=0.8, false_share=0.1, jitter=0.2, near_miss=0.3, over_flag=1.0, broken=0.0
    )
    assert parse_sim("sim-score-p0.7-s0.9-m1") == SimScore(
        sensitivity=0.9, specificity=0.7, mild=1.0
    )
    rule = parse_model("stub-sim-spans-r0.8-f0.1+ms50+429x2+text")
    assert rule.answer == "sim-spans-r0.8-f0.1"
    assert rule.faults == (("429", 2),) and rule.text and rule.latency_ms == 50.0
    for bad, message in (
        ("sim-spans-s0.9", "bad parameter"),
        ("sim-score-r0.9", "bad parameter"),
        ("sim-spans-r1.5", "outside"),
        ("sim-spans-f1", "outside"),
        ("sim-spans-r0.5-r0.6", "twice"),
        ("sim-votes-r1", "expected sim-spans"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_sim(bad)


def test_response_is_cut_from_both_seed_prompts() -> None:
    tricky = "It said <output>x</output> and\n\n## Score range\nthen stopped."
    spans = load_template(SPANS_PROMPT).render({"reference": "{}", "response": "An article."})
    score = load_template(SCORE_PROMPT).render({"input": "a\n</output>", "output": tricky})
    assert response_in(spans) == "An article."
    cut = response_in(score)
    assert cut is not None and cut.startswith("It said") and cut.endswith("then stopped.")
    # The rendered value has its <output> tags escaped; the lookup undoes that.
    assert Gold({tricky: GoldEntry((), False)}).find(score) == tricky
    # A prompt whose slot cannot be cut out is searched for any known response.
    assert Gold({"An article.": GoldEntry((), False)}).find("Judge: An article. Now.") == (
        "An article."
    )
    assert Gold({"An article.": GoldEntry((), False)}).find(spans) == "An article."


def test_load_gold_merges_repeats_and_defaults_the_verdict(tmp_path: Path) -> None:
    rows = [
        {"response": "Alpha beta gamma.", "labels": [{"start": 0, "end": 5, "text": "Alpha"}]},
        {"response": "Alpha beta gamma.", "labels": [{"start": 6, "end": 10, "text": "beta"}]},
        {"response": "Clean text here.", "labels": []},
        {"response": "Verdict only.", "labels": [], "hallucinated": True},
    ]
    path = tmp_path / "gold.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    gold = load_gold(path)
    assert gold["Alpha beta gamma."] == GoldEntry(((0, 5), (6, 10)), True)
    assert gold["Clean text here."] == GoldEntry((), False)
    assert gold["Verdict only."] == GoldEntry((), True)
    assert gold.spans_per_item == pytest.approx(2 / 3)

    csv = tmp_path / "gold.csv"
    csv.write_text('response,labels\n"One two.","[{""start"": 0, ""end"": 3}]"\n')
    assert load_gold(csv)["One two."] == GoldEntry(((0, 3),), True)
    with pytest.raises(ValueError, match="no column"):
        load_gold(csv, column="answer")


# --- span judges over HTTP -----------------------------------------------------------------


@needs_ragtruth
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_perfect_span_judge_reproduces_gold_offsets(
    stub: StubHandle, gold: Gold, items: list[Item], provider: str
) -> None:
    chosen = [i for i in items if i.gold and i.gold.spans and unambiguous(i)][:20]
    assert len(chosen) == 20
    judgments = await judge_all(stub, "stub-sim-spans-r1-f0", chosen, provider=provider)
    for item, judgment in zip(chosen, judgments, strict=True):
        assert judgment.score == 1.0, judgment.unscored_reason
        assert sorted(voting(judgment)) == gold_spans(gold, item), item.item_id
        assert {s.match for s in judgment.spans} == {"exact"}


@needs_ragtruth
async def test_measured_recall_and_precision_match_the_configured_ones(
    stub: StubHandle, gold: Gold, items: list[Item]
) -> None:
    judgments = await judge_all(stub, "stub-sim-spans-r0.7-f0.2", items)
    assert all(j.scored for j in judgments)
    predicted = [voting(j) for j in judgments]
    golds = [gold_spans(gold, i) for i in items]
    found = sum(len(set(p) & set(g)) for p, g in zip(predicted, golds, strict=True))
    false = sum(
        not any(s < ge and gs < e for gs, ge in g)
        for p, g in zip(predicted, golds, strict=True)
        for s, e in p
    )
    flagged = sum(len(p) for p in predicted)
    # Tolerances hold for server seeds 0-9 on this file (186 rows, 199 gold spans).
    assert found / sum(len(g) for g in golds) == pytest.approx(0.7, abs=0.08)
    assert 1 - false / flagged == pytest.approx(0.8, abs=0.08)
    chars = span_prf(predicted, golds)
    assert chars.recall == pytest.approx(0.7, abs=0.12)
    assert chars.precision == pytest.approx(0.8, abs=0.12)
    # False spans land on clean responses too, so their verdicts are not all "clean".
    clean = [j for j, i in zip(judgments, items, strict=True) if not gold_spans(gold, i)]
    assert 0 < sum(bool(j.verdict) for j in clean) < len(clean) / 2


@needs_ragtruth
async def test_answers_are_deterministic_per_judge_and_item(gold: Gold, items: list[Item]) -> None:
    model = "stub-sim-spans-r0.6-f0.3-j0.3-n0.3"
    subset = items[:25]
    with running_stub_server(StubConfig(gold=gold, latency_jitter_ms=5)) as first:
        together = await judge_all(first, model, subset)
        judge = make_judge(first, model, SPANS_PROMPT)
        one_by_one = [await judge.judge(item) for item in reversed(subset)][::-1]
        await judge.aclose()
        other_name = await judge_all(first, model + "+ms1", subset)
    with running_stub_server(StubConfig(gold=gold)) as second:
        again = await judge_all(second, model, subset, provider="anthropic")
    with running_stub_server(StubConfig(gold=gold, seed=1)) as reseeded:
        other_seed = await judge_all(reseeded, model, subset)

    def answers(judgments: list[Judgment]) -> list[tuple[str, ...]]:
        return [tuple(s.requested for s in j.spans) for j in judgments]

    assert answers(together) == answers(one_by_one) == answers(again)
    # Another judge (name) or another server seed errs on other items.
    assert answers(other_name) != answers(together)
    assert answers(other_seed) != answers(together)


@needs_ragtruth
async def test_span_quirks(stub: StubHandle, gold: Gold, items: list[Item]) -> None:
    flagged = [i for i in items if i.gold and i.gold.spans and unambiguous(i)][:20]
    clean = [i for i in items if i.gold and not i.gold.hallucinated][:20]

    near = await judge_all(stub, "stub-sim-spans-n1", flagged)
    matches = {s.match for j in near for s in j.spans}
    assert "normalized" in matches and "unmatched" not in matches
    assert sum(len(voting(j)) for j in near) >= 0.9 * sum(len(gold_spans(gold, i)) for i in flagged)

    jittered = await judge_all(stub, "stub-sim-spans-j1", flagged)
    overlapping = moved = total = 0
    for judgment, item in zip(jittered, flagged, strict=True):
        for g in gold_spans(gold, item):
            near_g = [p for p in voting(judgment) if p[0] < g[1] and g[0] < p[1]]
            total += 1
            overlapping += bool(near_g)
            moved += bool(near_g) and g not in near_g
    assert overlapping >= 0.9 * total  # still about the same claim ...
    assert moved >= 0.7 * total  # ... with a word more or less at one end

    over = await judge_all(stub, "stub-sim-spans-o1", clean)
    assert all(j.verdict for j in over)
    assert all(len(j.spans) == 1 and len(j.spans[0].text) >= 20 for j in over)
    # An over-flagger adds nothing to responses that do have hallucinations.
    also = await judge_all(stub, "stub-sim-spans-o1", flagged)
    assert [sorted(voting(j)) for j in also] == [gold_spans(gold, i) for i in flagged]


@needs_ragtruth
async def test_broken_quirk_leaves_judgments_unscored_with_a_reason(
    stub: StubHandle, items: list[Item]
) -> None:
    judgments = await judge_all(stub, "stub-sim-spans-r0.9-b0.3", items)
    unscored = [j for j in judgments if not j.scored]
    # A binomial share of 186 rows: four standard deviations are about 0.13.
    assert len(unscored) / len(items) == pytest.approx(0.3, abs=0.13)
    assert all(j.unscored_reason and "unparseable" in j.unscored_reason for j in unscored)
    everything = await judge_all(stub, "stub-sim-score-b1", items[:5], SCORE_PROMPT)
    assert all(j.score is None and j.unscored_reason for j in everything)


async def test_unknown_response_gets_a_random_answer_and_bad_names_a_400(
    stub: StubHandle,
) -> None:
    unknown = Item("x", {"reference": "{}", "response": "Not in the gold set at all, 12 cats."})
    (judgment,) = await judge_all(stub, "stub-sim-spans-r1", [unknown])
    assert judgment.scored
    (bad,) = await judge_all(stub, "stub-sim-spans-q1", [unknown])
    assert bad.unscored_reason and "bad parameter" in bad.unscored_reason


# --- score judges over HTTP ----------------------------------------------------------------


@pytest.fixture(scope="module")
def all_items() -> list[Item]:
    """The three RAGTruth dev files, for tighter estimates of verdict rates."""
    files = sorted(RAGTRUTH.glob("*_dev.jsonl"))
    if not files:
        pytest.skip(f"RAGTruth dev splits not found at {RAGTRUTH}")
    rows = [row for path in files for row in read_items(path, ("input", "output"))]
    return [row for row in rows if isinstance(row, Item)]


@pytest.fixture(scope="module")
def all_stub(all_items: list[Item]) -> Iterator[StubHandle]:
    files = sorted(RAGTRUTH.glob("*_dev.jsonl"))
    merged = {text: entry for path in files for text, entry in load_gold(path).items()}
    with running_stub_server(StubConfig(gold=Gold(merged))) as handle:
        yield handle


@needs_ragtruth
async def test_score_judge_verdicts_match_sensitivity_and_specificity(
    all_stub: StubHandle, all_items: list[Item]
) -> None:
    judgments = await judge_all(all_stub, "stub-sim-score-s0.8-p0.7", all_items, SCORE_PROMPT)
    assert {j.score for j in judgments} <= {0.0, 0.3, 0.6, 1.0}
    truth = [bool(i.gold and i.gold.hallucinated) for i in all_items]
    said = [(j.score or 0.0) >= 0.3 for j in judgments]  # the prompt's "0.3 counts" rule
    positives = [s for s, t in zip(said, truth, strict=True) if t]
    negatives = [not s for s, t in zip(said, truth, strict=True) if not t]
    # Tolerances hold for server seeds 0-9 (about 200 hallucinated and 290 clean rows).
    assert sum(positives) / len(positives) == pytest.approx(0.8, abs=0.08)
    assert sum(negatives) / len(negatives) == pytest.approx(0.7, abs=0.08)


@needs_ragtruth
async def test_mild_score_judge_slips_under_a_half_threshold(
    all_stub: StubHandle, all_items: list[Item]
) -> None:
    mild = await judge_all(all_stub, "stub-sim-score-m1", all_items, SCORE_PROMPT)
    plain = await judge_all(all_stub, "stub-sim-score", all_items, SCORE_PROMPT)
    hallucinated = [i.gold is not None and bool(i.gold.hallucinated) for i in all_items]
    for judgments in (mild, plain):
        # Perfect under the prompt's own 0.3 threshold ...
        assert [(j.score or 0.0) >= 0.3 for j in judgments] == hallucinated
    # ... but a fixed "> 0.5" misses the mild cases of the judge that scores them 0.3.
    mild_misses = sum(
        h and (j.score or 0.0) <= 0.5 for j, h in zip(mild, hallucinated, strict=True)
    )
    plain_misses = sum(
        h and (j.score or 0.0) <= 0.5 for j, h in zip(plain, hallucinated, strict=True)
    )
    assert plain_misses == 0
    assert mild_misses > 0.3 * sum(hallucinated)


# --- the command lines ---------------------------------------------------------------------


def test_module_entry_point_serves_sim_judges_from_gold(tmp_path: Path) -> None:
    response = "The cafe opens at 9 am and serves ramen on Sundays."
    dataset = tmp_path / "gold.jsonl"
    label = {"start": 34, "end": 51, "text": "ramen on Sundays."}
    dataset.write_text(json.dumps({"response": response, "labels": [label]}) + "\n")
    prompt = load_template(SPANS_PROMPT).render({"reference": "{}", "response": response})
    stand_in = [sys.executable, "-m", "juryflow.standin.server"]
    process = subprocess.Popen(
        [*stand_in, "--port", "0", "--gold", str(dataset)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[4]
        reply = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": "stub-sim-spans-r1+text",
                "messages": [{"role": "user", "content": prompt}],
            },
            timeout=5,
        )
        answer = json.loads(reply.json()["choices"][0]["message"]["content"])
        assert answer["hallucination_list"] == ["ramen on Sundays."]
    finally:
        process.terminate()
        process.wait(10)


def test_cli_stub_server_rejects_an_unreadable_gold_set(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from juryflow.cli import app

    result = CliRunner().invoke(app, ["stub-server", "--gold", str(tmp_path / "no.jsonl")])
    assert result.exit_code == 2
    assert "does not exist" in " ".join(result.output.split())
