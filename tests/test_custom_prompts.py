"""Prompt files in a panel (`prompt: ./path.txt` with `output:`): declarations checked when
the panel loads, variables checked against the dataset before any call, the text's SHA-256
stored with every judgment, and the text carried with the judge to tasks and resumes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from juryflow.judges.panel import JudgeSpec, PanelError, load_panel, parse_panel
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE

SCORE_PROMPT = """\
Rate how much of the answer is unsupported by the source.

<source>
{{ reference }}
</source>

<answer>
{{ response }}
</answer>

Reply with JSON: {"score": <0.0 to 1.0>, "reasoning": "<why>"}
"""

# The stand-in cuts its spans from a "**Generated Article:**" section, as the seed prompt has.
SPANS_PROMPT = """\
List the hallucinated spans of the article.

**Reference:**
{{ reference }}

**Generated Article:**
{{ article }}

## Output Format Requirements

{"hallucination_list": ["<exact span>", ...]}
"""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(latency_ms=1)) as handle:
        yield handle


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    path = tmp_path / "subset.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:6]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def project(tmp_path: Path, judges: str, prompts: dict[str, str]) -> Path:
    """A panel file in ``tmp_path/project`` with its prompt files under ``prompts/``."""
    folder = tmp_path / "project"
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    for name, text in prompts.items():
        (folder / "prompts" / name).write_text(text, encoding="utf-8")
    panel = folder / "panel.yaml"
    panel.write_text(f"name: custom\njudges:\n{judges}", encoding="utf-8")
    return panel


def llm_judge(stub: StubHandle, judge_id: str, model: str, extra: str) -> str:
    return (
        f"  - {{id: {judge_id}, provider: anthropic, model: {model}, "
        f"base_url: '{stub.anthropic_base_url}', {extra}}}\n"
    )


# --- declarations ------------------------------------------------------------------------


def test_a_relative_prompt_path_is_read_beside_the_panel_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    panel_file = project(
        tmp_path,
        "  - {id: mine, provider: openai, model: m, prompt: prompts/judge.txt, output: score}\n",
        {"judge.txt": SCORE_PROMPT},
    )
    monkeypatch.chdir(tmp_path)  # not the panel's folder: the path is the panel's
    spec = load_panel(panel_file).judge("mine")
    template = spec.template()
    assert spec.prompt == str((panel_file.parent / "prompts" / "judge.txt").resolve())
    assert spec.prompt_text == SCORE_PROMPT
    assert template.variables == ("reference", "response")
    assert template.output_kind == "score" and template.sha256 == sha(SCORE_PROMPT)
    assert template.ref == f"file:judge@{sha(SCORE_PROMPT)[:12]}"
    assert template.record() == {
        "name": template.ref,
        "file": spec.prompt,
        "sha256": sha(SCORE_PROMPT),
    }


def test_a_spans_prompt_names_its_span_variable_and_the_threshold_is_the_judges(
    tmp_path: Path,
) -> None:
    panel_file = project(
        tmp_path,
        "  - {id: s, provider: openai, model: m, prompt: ./prompts/spans.txt, output: spans,\n"
        "     span_variable: article, verdict_threshold: 0.4}\n",
        {"spans.txt": SPANS_PROMPT},
    )
    panel = load_panel(panel_file)
    template = panel.judge("s").template()
    assert template.output_kind == "spans" and template.span_variable == "article"
    assert template.verdict_threshold == 0.4
    assert panel.all_span_judges


BAD_DECLARATIONS = [
    # (judge entry, prompt files, the fix the message names)
    ("prompt: ./prompts/p.txt", {"p.txt": SCORE_PROMPT}, "declare what the judge answers"),
    ("prompt: ./prompts/p.txt, output: verdict", {"p.txt": SCORE_PROMPT}, "or 'preference'"),
    ("prompt: ./prompts/gone.txt, output: score", {}, "gone.txt does not exist"),
    (
        "prompt: ./prompts/p.txt, output: spans, span_variable: answer",
        {"p.txt": SCORE_PROMPT},
        "'span_variable: answer' is not one of its variables",
    ),
    (
        "prompt: ./prompts/s.txt, output: spans",
        {"s.txt": SPANS_PROMPT},
        "a spans prompt needs 'span_variable'",
    ),
    (
        "prompt: ./prompts/p.txt, output: score, span_variable: response",
        {"p.txt": SCORE_PROMPT},
        "'span_variable' is for 'output: spans'",
    ),
    ("prompt: data2txt_spans, output: score", {}, "a catalogue prompt declares its own"),
    ("prompt: my_prompt", {}, "a prompt file is given by its path"),
    (
        "prompt: ./prompts/p.txt, output: score",
        {"p.txt": "Judge this: {{ response }}\n"},
        "has no variable",
    ),
    (
        "prompt: ./prompts/p.txt, output: score",
        {"p.txt": SCORE_PROMPT + "Also compare with {{ question }}.\n"},
        "{{ question }} sits inside a line",
    ),
    ("prompt: ./prompts/p.txt, output: score, prompt_text: hi", {}, "filled in by juryflow"),
]


@pytest.mark.parametrize(("entry", "files", "fix"), BAD_DECLARATIONS)
def test_bad_declarations_are_one_line_naming_the_fix(
    tmp_path: Path, entry: str, files: dict[str, str], fix: str
) -> None:
    panel_file = project(tmp_path, f"  - {{id: j, provider: openai, model: m, {entry}}}\n", files)
    with pytest.raises(PanelError) as raised:
        load_panel(panel_file)
    message = str(raised.value)
    assert fix in message and "\n" not in message, message


def test_a_prompt_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    panel_file = project(
        tmp_path, "  - {id: j, provider: openai, model: m, prompt: p.bin, output: score}\n", {}
    )
    (panel_file.parent / "p.bin").write_bytes(b"caf\xe9 {{ x }}\n")
    with pytest.raises(PanelError, match="not UTF-8 text; save it as UTF-8"):
        load_panel(panel_file)


def test_the_stored_hash_is_the_files_own_even_with_crlf_line_ends(tmp_path: Path) -> None:
    panel_file = project(
        tmp_path, "  - {id: j, provider: openai, model: m, prompt: p.txt, output: score}\n", {}
    )
    raw = SCORE_PROMPT.replace("\n", "\r\n").encode("utf-8")
    (panel_file.parent / "p.txt").write_bytes(raw)
    template = load_panel(panel_file).judge("j").template()
    assert template.sha256 == hashlib.sha256(raw).hexdigest()  # what `sha256sum` prints
    assert template.variables == ("reference", "response")
    rendered = template.render({"reference": "REF", "response": "RESP"})
    assert "REF" in rendered and "RESP" in rendered and "{{" not in rendered


def test_the_spec_carries_the_text_so_no_worker_needs_the_file(tmp_path: Path) -> None:
    panel_file = project(
        tmp_path,
        "  - {id: mine, provider: openai, model: m, prompt: prompts/p.txt, output: score}\n",
        {"p.txt": SCORE_PROMPT},
    )
    panel = load_panel(panel_file)
    (panel_file.parent / "prompts" / "p.txt").unlink()
    # How tasks get it (pickled for Dask), how a run stores it (runs.panel, JSON), and how a
    # resume, calibrate or reaggregate reads it back: none of them touches the file.
    shipped = pickle.loads(pickle.dumps(panel.judge("mine")))
    stored = parse_panel(json.loads(json.dumps(panel.public_dict())), "run r1")
    for spec in (shipped, stored.judge("mine"), JudgeSpec.model_validate_json(
        panel.judge("mine").model_dump_json()
    )):  # fmt: skip
        assert spec.template().sha256 == sha(SCORE_PROMPT)


# --- runs against the stand-in server ---------------------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_a_file_prompt_run_stores_its_hash_with_every_judgment(
    stub: StubHandle, subset: Path, tmp_path: Path, db_path: Path
) -> None:
    from juryflow.flows.evaluate import evaluate

    panel_file = project(
        tmp_path,
        llm_judge(stub, "scorer", "stub-score-0.6", "prompt: ./prompts/score.txt, output: score")
        + llm_judge(
            stub,
            "spotter",
            "stub-spans-good",
            "prompt: prompts/spans.txt, output: spans, span_variable: article",
        )
        + "  - {id: numbers, provider: offline, detector: numbers}\n",
        {"score.txt": SCORE_PROMPT, "spans.txt": SPANS_PROMPT},
    )
    summary = asyncio.run(
        evaluate(
            RunRequest(
                dataset=str(subset),
                panel=str(panel_file),
                db=str(db_path),
                mapping={"article": "response"},
            )
        )
    )
    assert summary["judgments"] == 18 and stub.stats.requests() == 12

    store = Store(db_path)
    _, rows = store.query(
        "SELECT judge_id, prompt_name, prompt_hash, count(*), count(score), "
        "count(DISTINCT score) FROM judgments WHERE run_id = ? AND provider <> 'offline' "
        "GROUP BY ALL ORDER BY judge_id",
        [summary["run_id"]],
    )
    assert rows[0][:3] == ("scorer", f"file:score@{sha(SCORE_PROMPT)[:12]}", sha(SCORE_PROMPT))
    assert rows[0][3:] == (6, 6, 1)  # every item scored 0.6
    assert rows[1][:3] == ("spotter", f"file:spans@{sha(SPANS_PROMPT)[:12]}", sha(SPANS_PROMPT))
    assert rows[1][3:5] == (6, 6)
    _, spans = store.query(
        "SELECT count(*), count(*) FILTER (WHERE match_kind = 'exact') FROM judgment_spans "
        "WHERE run_id = ? AND judge_id = 'spotter'",
        [summary["run_id"]],
    )
    assert spans[0][0] > 0 and spans[0][0] == spans[0][1]  # cut from the mapped article
    run = store.get_run(summary["run_id"])
    assert run is not None
    assert {p["sha256"] for p in run.prompts} == {sha(SCORE_PROMPT), sha(SPANS_PROMPT)}
    # The rendered prompt is the file's text with the dataset's values in its slots.
    first = json.loads(subset.read_text(encoding="utf-8").splitlines()[0])
    assert any(first["response"] in p and "Rate how much" in p for p in stub.prompts())


@pytest.mark.usefixtures("prefect_harness")
def test_a_resume_judges_with_the_stored_text_and_says_the_file_changed(
    stub: StubHandle, subset: Path, tmp_path: Path, db_path: Path
) -> None:
    from juryflow.flows.evaluate import evaluate
    from juryflow.planning.run_setup import RunSetupError, plan_run, preflight_resume

    panel_file = project(
        tmp_path,
        llm_judge(stub, "scorer", "stub-score-0.3", "prompt: prompts/p.txt, output: score"),
        {"p.txt": SCORE_PROMPT},
    )
    # A run that stopped before its first call: created, never judged.
    plan = plan_run(
        RunRequest(
            dataset=str(subset),
            panel=str(panel_file),
            db=str(db_path),
            resume=None,
            suite=None,
            chunk_size=200,
            quorum=None,
            mapping=None,
            use_cache=True,
        )
    )
    edited = SCORE_PROMPT.replace("Rate how much", "EDITED: rate how much")
    (panel_file.parent / "prompts" / "p.txt").write_text(edited, encoding="utf-8")

    warnings = preflight_resume(RunRequest(db=str(db_path), resume=plan.run_id))
    assert len(warnings) == 1 and "prompt file" in warnings[0] and "changed" in warnings[0]
    assert "uses the run's stored prompt text" in warnings[0]
    with pytest.raises(RunSetupError, match=r"p\.txt changed since the run started"):
        preflight_resume(RunRequest(db=str(db_path), resume=plan.run_id, panel=str(panel_file)))

    summary = asyncio.run(evaluate(RunRequest(resume=plan.run_id, db=str(db_path))))
    assert summary["judgments"] == 6
    _, rows = Store(db_path).query(
        "SELECT DISTINCT prompt_hash FROM judgments WHERE run_id = ?", [plan.run_id]
    )
    assert rows == [(sha(SCORE_PROMPT),)]
    assert stub.prompts() and not any("EDITED" in p for p in stub.prompts())


@pytest.mark.usefixtures("prefect_harness")
def test_a_file_prompt_travels_to_dask_worker_processes(
    stub: StubHandle, subset: Path, tmp_path: Path, db_path: Path
) -> None:
    prefect_dask = pytest.importorskip("prefect_dask")
    from typing import Any

    from juryflow.flows.evaluate import evaluate

    panel_file = project(
        tmp_path,
        llm_judge(stub, "scorer", "stub-score-1.0", "prompt: prompts/p.txt, output: score"),
        {"p.txt": SCORE_PROMPT},
    )
    runner: Any = prefect_dask.DaskTaskRunner(
        cluster_kwargs={"n_workers": 1, "threads_per_worker": 1, "processes": True}
    )
    flow = evaluate.with_options(task_runner=runner)
    summary = asyncio.run(
        # dask: the chunk tasks go to the task runner's workers (this one, a local cluster)
        flow(
            RunRequest(
                dataset=str(subset), panel=str(panel_file), db=str(db_path), chunk_size=3,
                dask="local",
            )
        )
    )  # fmt: skip
    _, rows = Store(db_path).query(
        "SELECT count(*), count(score), any_value(prompt_hash) FROM judgments WHERE run_id = ?",
        [summary["run_id"]],
    )
    assert rows == [(6, 6, sha(SCORE_PROMPT))]


# --- the command line: checked before any call ------------------------------------------


def juryflow(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    env.setdefault("PREFECT_HOME", str(REPO / ".venv" / "prefect-home"))
    return subprocess.run(
        [sys.executable, "-m", "juryflow", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_a_variable_the_dataset_lacks_fails_before_any_call(
    stub: StubHandle, subset: Path, tmp_path: Path, db_path: Path
) -> None:
    question_prompt = SCORE_PROMPT.replace("{{ reference }}", "{{ question }}")
    panel_file = project(
        tmp_path,
        llm_judge(stub, "scorer", "stub-score-0.3", "prompt: prompts/q.txt, output: score"),
        {"q.txt": question_prompt},
    )
    done = juryflow("run", str(subset), "--panel", str(panel_file), "--db", str(db_path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "variable 'question'" in lines[0], done.stderr
    assert "--map question=COLUMN" in lines[0]
    assert stub.stats.requests() == 0 and "Traceback" not in done.stderr


def test_a_bad_declaration_exits_2_with_one_line(tmp_path: Path, db_path: Path) -> None:
    panel_file = project(
        tmp_path,
        "  - {id: j, provider: openai, model: m, prompt: ./prompts/p.txt}\n",
        {"p.txt": SCORE_PROMPT},
    )
    done = juryflow("run", str(SAMPLE), "--panel", str(panel_file), "--db", str(db_path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "output: score" in lines[0], done.stderr


def test_span_judges_must_flag_spans_in_one_text(
    stub: StubHandle, subset: Path, tmp_path: Path, db_path: Path
) -> None:
    from juryflow.planning.run_setup import RunSetupError, preflight

    panel_file = project(
        tmp_path,
        llm_judge(
            stub,
            "spotter",
            "stub-spans-good",
            "prompt: prompts/spans.txt, output: spans, span_variable: article",
        )
        + "  - {id: numbers, provider: offline, detector: numbers}\n",
        {"spans.txt": SPANS_PROMPT},
    )
    # The detector flags the response; spans into the reference would be voted on as
    # offsets of the same text.
    with pytest.raises(RunSetupError, match="flag spans in different texts") as raised:
        preflight(
            RunRequest(
                dataset=str(subset),
                panel=str(panel_file),
                mapping={"article": "reference"},
                db=str(db_path),
            )
        )
    assert "--map VAR=COLUMN" in str(raised.value) and "\n" not in str(raised.value)
    assert (
        preflight(
            RunRequest(
                dataset=str(subset),
                panel=str(panel_file),
                mapping={"article": "response"},
                db=str(db_path),
            )
        )
        == []
    )
    # the dry run refuses what the run would
    from juryflow.planning.dry_run import estimate_run

    with pytest.raises(RunSetupError, match="flag spans in different texts"):
        estimate_run(
            RunRequest(
                dataset=str(subset),
                panel=str(panel_file),
                mapping={"article": "reference"},
                db=str(db_path),
            )
        )
    assert stub.stats.requests() == 0
