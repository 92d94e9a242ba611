"""A local model as a judge (issue 25, point 4): the openai provider against the stand-in
speaking a local server's dialect (Ollama, vLLM, the llama.cpp server), with the real
openai SDK over real HTTP, real Prefect and real DuckDB.

Such a server refuses ``tools`` (juryflow never sends them), answers JSON as text the way
small models write it (bare, fenced, after a sentence), reports usage without cached
tokens and has no batch API. The local panel runs and scores; fenced and prefixed JSON is
parsed, validated and anchored; prose and broken JSON are unscored with their reason;
``--batch`` judges in real time with one warning.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from juryflow.standin.batches import stats_of
from juryflow.standin.dialects import DIALECTS, PREAMBLE
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE

LOCAL_PANEL = REPO / "examples" / "panel.local.yaml"
OLLAMA_URL = "http://localhost:11434/v1"
LOCAL = [d for d in DIALECTS if d != "openai"]
TOOLS = [
    {
        "type": "function",
        "function": {"name": "answer", "parameters": {"type": "object", "properties": {}}},
    }
]
PROMPT = "Judge this.\n\n**Generated Article:**\nThe bridge opened in 1932 and carries 4 lanes."

runs = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def ollama() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(dialect="ollama")) as stub:
        yield stub


def sdk(stub: StubHandle) -> openai.OpenAI:
    return openai.OpenAI(base_url=stub.openai_base_url, api_key="ollama", max_retries=0)


def ask(stub: StubHandle, model: str = "llama3.1", prompt: str = PROMPT, **extra: Any) -> Any:
    messages = [{"role": "user", "content": prompt}]
    return sdk(stub).chat.completions.create(model=model, messages=messages, **extra)  # type: ignore[arg-type]


def local_panel(path: Path, base_url: str, **changes: Any) -> Path:
    """examples/panel.local.yaml with its model's base URL (and any other key) changed."""
    panel = yaml.safe_load(LOCAL_PANEL.read_text(encoding="utf-8"))
    (llama,) = [j for j in panel["judges"] if j["id"] == "llama"]
    assert llama["base_url"] == OLLAMA_URL  # the panel as shipped points at Ollama
    llama.update(base_url=base_url, **changes)
    path.write_text(yaml.safe_dump(panel), encoding="utf-8")
    return path


def rows(db: Path, run_id: str, sql: str) -> list[tuple[Any, ...]]:
    with Store(db).read() as con:
        return con.execute(sql, [run_id]).fetchall()


# --- the dialects on the wire -----------------------------------------------------------


@pytest.mark.parametrize("dialect", LOCAL)
def test_a_local_server_refuses_tools_as_it_does(dialect: str) -> None:
    expected = {
        "ollama": (openai.BadRequestError, "registry.ollama.ai/library/llama3.1:latest "),
        "vllm": (openai.BadRequestError, '"auto" tool choice requires --enable-auto-tool'),
        "llamacpp": (openai.InternalServerError, "tools param requires --jinja flag"),
    }
    error, message = expected[dialect]
    with running_stub_server(StubConfig(dialect=dialect)) as stub:
        with pytest.raises(error) as raised:
            ask(stub, tools=TOOLS)
        assert message in str(raised.value)
        # vLLM answers a named tool choice (guided decoding) with a tool call
        if dialect == "vllm":
            named = {"type": "function", "function": {"name": "answer"}}
            answer = ask(stub, tools=TOOLS, tool_choice=named).choices[0].message
            assert answer.tool_calls and answer.content is None
        # without tools the same request is answered
        assert ask(stub).choices[0].message.content


def test_openai_dialect_still_answers_tools_with_a_tool_call() -> None:
    with running_stub_server() as stub:
        assert ask(stub, tools=TOOLS).choices[0].message.tool_calls


def test_local_answers_are_json_as_small_models_write_it(ollama: StubHandle) -> None:
    prompts = [f"{PROMPT} Item {n}." for n in range(24)]
    forms: Counter[str] = Counter()
    for prompt in prompts:
        completion = ask(ollama, prompt=prompt)
        text = completion.choices[0].message.content
        assert completion.usage is not None and completion.usage.completion_tokens > 0
        assert completion.usage.prompt_tokens_details is None  # no cached-token count
        if text.startswith("```json\n") and text.endswith("\n```"):
            forms["fenced"] += 1
        elif text.startswith(PREAMBLE):
            forms["prefixed"] += 1
        else:
            json.loads(text)
            forms["plain"] += 1
    assert set(forms) == {"plain", "fenced", "prefixed"}, forms
    # seeded by the prompt: the same prompt is written the same way again
    again = [ask(ollama, prompt=p).choices[0].message.content for p in prompts[:3]]
    assert again == [ask(ollama, prompt=p).choices[0].message.content for p in prompts[:3]]
    # a JSON schema (vLLM, llama.cpp; JSON mode on Ollama) gets bare JSON
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    for prompt in prompts[:6]:
        text = ask(ollama, prompt=prompt, response_format=schema).choices[0].message.content
        assert isinstance(json.loads(text), dict)


def test_a_local_server_has_no_batch_api(ollama: StubHandle) -> None:
    with pytest.raises(openai.NotFoundError):
        sdk(ollama).batches.list()


def test_an_unknown_dialect_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="ollama, vllm, llamacpp"):
        StubConfig(dialect="lmstudio")


# --- runs ----------------------------------------------------------------------------------


@runs
def test_answers_of_every_form_are_parsed_anchored_or_unscored_with_a_reason(
    tmp_path: Path, ollama: StubHandle
) -> None:
    """Fenced and prefixed JSON score like bare JSON, with or without a schema asked for;
    prose and broken JSON are unscored with what was wrong, never given a grade."""
    models = {
        "fenced": "stub-spans-good+fenced",
        "prefixed": "stub-spans-good+prefixed",
        "seeded": "stub-spans-good",  # the dialect's own mix of forms
        "prose": "stub-prose",
        "broken": "stub-broken",
    }
    lines = ["name: forms", "judges:"]
    for judge, model in models.items():
        for structured in (False, True):
            lines.append(
                f"  - {{id: {judge}-{'schema' if structured else 'text'}, provider: openai, "
                f"model: '{model}', prompt: data2txt_spans, base_url: "
                f"'{ollama.openai_base_url}', structured_output: {str(structured).lower()}}}"
            )
    panel = tmp_path / "forms.yaml"
    panel.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "store.duckdb"
    summary = asyncio.run(
        evaluate(
            RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(db), use_cache=False, limit=3)
        )
    )
    judged = rows(
        db,
        summary["run_id"],
        "SELECT judge_id, count(score), count(*) - count(score), "
        "list(DISTINCT unscored_reason) FILTER (WHERE unscored_reason IS NOT NULL), "
        "list(raw_output) FROM judgments WHERE run_id = ? GROUP BY judge_id",
    )
    by_judge = {judge: tuple(rest) for judge, *rest in judged}
    assert len(by_judge) == 10
    for judge in ("fenced", "prefixed", "seeded"):
        for mode in ("text", "schema"):
            assert by_judge[f"{judge}-{mode}"][:2] == (3, 0), judge
    # the fenced and prefixed text reached the parser as the model wrote it
    assert all(r.startswith("```json") for r in by_judge["fenced-text"][3])
    assert all(r.startswith(PREAMBLE) for r in by_judge["prefixed-text"][3])
    for mode in ("text", "schema"):
        scored, unscored, reasons, _ = by_judge[f"prose-{mode}"]
        assert (scored, unscored) == (0, 3)
        assert reasons == ["unparseable output: no JSON object found in the output"]
        scored, unscored, reasons, _ = by_judge[f"broken-{mode}"]
        assert (scored, unscored) == (0, 3)
        assert len(reasons) == 1
        assert reasons[0].startswith("unparseable output: no complete JSON object found")
    # every good answer's spans were anchored in the response
    anchored = rows(
        db,
        summary["run_id"],
        "SELECT count(*), count(char_start) FROM judgment_spans "
        "WHERE run_id = ? AND (judge_id LIKE 'fenced-%' OR judge_id LIKE 'prefixed-%')",
    )
    assert anchored[0][0] > 0 and anchored[0][0] == anchored[0][1]
    # juryflow never sends tools: no request was refused
    assert set(ollama.stats.snapshot()["by_outcome"]) == {"ok"}


@runs
def test_batch_with_a_local_server_judges_in_real_time_with_one_warning(
    tmp_path: Path, ollama: StubHandle
) -> None:
    panel = local_panel(tmp_path / "panel.yaml", ollama.openai_base_url)
    db = tmp_path / "store.duckdb"
    summary = asyncio.run(
        evaluate(
            RunRequest(
                dataset=str(SAMPLE),
                panel=str(panel),
                db=str(db),
                use_cache=False,
                limit=3,
                batch=True,
            )
        )
    )
    assert stats_of(ollama.server).get("batches_created") == 0
    (warning,) = summary["warnings"]
    assert "judge 'llama' is judged in real time, at full price:" in warning
    assert "set batch: false for judge 'llama'" in warning
    judged = rows(
        db,
        summary["run_id"],
        "SELECT count(*), count(score), count(batch_id) FROM judgments "
        "WHERE run_id = ? AND judge_id = 'llama'",
    )
    assert judged == [(3, 3, 0)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ollama_process() -> Iterator[str]:
    """The README's `juryflow stub-server --dialect ollama --port 11434 &`, on a
    free port instead of Ollama's (a real Ollama may be listening there)."""
    port = _free_port()
    command = [sys.executable, "-m", "juryflow", "stub-server", "--dialect", "ollama"]
    process = subprocess.Popen(
        [*command, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "chat completions as ollama answers them" in line, line
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(30)


@runs
def test_the_readme_local_panel_runs_against_the_stand_in(
    tmp_path: Path, ollama_process: str
) -> None:
    """`juryflow run examples/ragtruth_data2txt_sample.jsonl --panel examples/panel.local.yaml`
    with the stand-in in Ollama's place: every answer scored, free, no key asked for."""
    panel = local_panel(tmp_path / "panel.local.yaml", ollama_process)
    db = tmp_path / "store.duckdb"
    env = {"OPENAI_API_KEY": None, "COLUMNS": "200"}  # a local server needs no key
    result = CliRunner().invoke(
        app, ["run", str(SAMPLE), "--panel", str(panel), "--db", str(db), "--limit", "4"], env=env
    )
    assert result.exit_code == 0, result.output
    _, found = Store(db).query("SELECT max(run_id) FROM runs")
    run_id = str(found[0][0])
    judged = rows(
        db,
        run_id,
        "SELECT judge_id, count(*), count(score), sum(cost_usd), min(input_tokens) "
        "FROM judgments WHERE run_id = ? GROUP BY judge_id ORDER BY judge_id",
    )
    assert [j[:3] for j in judged] == [(j, 4, 4) for j in ("content", "llama", "names", "numbers")]
    llama = next(j for j in judged if j[0] == "llama")
    assert llama[3] == 0.0 and llama[4] > 0  # priced at zero, with the server's usage
    consensus = rows(db, run_id, "SELECT count(*) FROM consensus WHERE run_id = ?")
    assert consensus == [(4,)]
