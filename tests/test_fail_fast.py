"""Fail fast, never a traceback: a judge that cannot succeed is stopped, a run mostly
without consensus ends non-zero, and every error a user can cause is one line, exit 2.

Real SDKs over real HTTP against the stand-in server, real DuckDB files, the real CLI.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from juryflow.cli import app
from juryflow.judges.breaker import STOP_AFTER, CircuitBreaker
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.base import ProviderError, error_from_status
from juryflow.judges.retry import call_with_retries
from juryflow.standin.server import running_stub_server
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE

runner = CliRunner()

KEY_ENV = "JURYFLOW_FAILFAST_KEY"
BAD_KEY_MODEL = "stub-spans-good+401"
UNKNOWN_MODEL = "stub-spans-good+404"
CONCURRENCY = 2


def _judge(id_: str, provider: str, model: str, url: str, **extra: object) -> str:
    options = "".join(f", {name}: {value}" for name, value in extra.items())
    return (
        f"  - {{id: {id_}, provider: {provider}, model: '{model}', prompt: data2txt_spans, "
        f"base_url: '{url}', api_key_env: {KEY_ENV}{options}}}\n"
    )


def _lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.strip()]


# -- the breaker on its own --------------------------------------------------------------


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (403, "auth"), (404, "not_found")])
def test_auth_and_unknown_model_errors_are_fatal_and_never_retried(status: int, kind: str) -> None:
    error = error_from_status(status, "no")
    assert error.kind == kind and error.fatal and not error.retryable
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise error

    import asyncio

    # even a should_retry that says yes does not get a fatal error retried
    with pytest.raises(ProviderError):
        asyncio.run(call_with_retries(failing, lambda _: True, max_attempts=5))
    assert calls == 1


def test_the_breaker_opens_after_consecutive_fatal_failures_only() -> None:
    spec = JudgeSpec(id="j", provider="openai", model="m", prompt="data2txt_spans")
    breaker = CircuitBreaker(spec)
    auth = error_from_status(401, "bad key")
    for _ in range(STOP_AFTER - 1):
        breaker.failed(auth)
    breaker.succeeded()  # one good answer: the key works, the failures were something else
    for _ in range(STOP_AFTER - 1):
        breaker.failed(auth)
    breaker.failed(error_from_status(500, "busy"))  # says nothing about the key
    assert breaker.stopped is None
    for _ in range(STOP_AFTER):
        breaker.failed(auth)
    stopped = breaker.stopped
    assert stopped is not None and "OPENAI_API_KEY" in stopped.line()


# -- stopped judges end the run non-zero ---------------------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_a_bad_key_and_an_unknown_model_stop_their_judges_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-failfast-wrong")
    db = tmp_path / "run.duckdb"
    with running_stub_server() as stub:
        panel = tmp_path / "panel.yaml"
        panel.write_text(
            "name: failfast\njudges:\n"
            + _judge("badkey", "anthropic", BAD_KEY_MODEL, stub.anthropic_base_url,
                     max_concurrency=CONCURRENCY)
            + _judge("nomodel", "openai", UNKNOWN_MODEL, stub.openai_base_url,
                     max_concurrency=CONCURRENCY)
            + _judge("good", "openai", "stub-spans-good", stub.openai_base_url),
            encoding="utf-8",
        )  # fmt: skip
        result = runner.invoke(
            app, ["run", str(SAMPLE), "--panel", str(panel), "--db", str(db), "--chunk-size", "20"]
        )
        bad_key_calls = stub.stats.requests(BAD_KEY_MODEL)
        unknown_model_calls = stub.stats.requests(UNKNOWN_MODEL)
        good_calls = stub.stats.requests("stub-spans-good")

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    # 60 items; each stopped judge was called only until its breaker opened (plus what its
    # concurrency had already in flight), never once per item
    assert STOP_AFTER <= bad_key_calls <= STOP_AFTER + CONCURRENCY
    assert STOP_AFTER <= unknown_model_calls <= STOP_AFTER + CONCURRENCY
    assert good_calls == 60
    stopped = [line for line in _lines(result) if "stopped after" in line]
    assert all(line.startswith("juryflow: judge ") for line in stopped), result.output
    assert len(stopped) == 2, result.output
    (badkey,) = [line for line in stopped if "'badkey'" in line]
    (nomodel,) = [line for line in stopped if "'nomodel'" in line]
    assert "HTTP 401" in badkey and KEY_ENV in badkey
    assert "HTTP 404" in nomodel and UNKNOWN_MODEL in nomodel
    assert "sk-failfast-wrong" not in result.output  # the stub quotes the key it got

    store = Store(db)
    _, rows = store.query(
        "SELECT judge_id, count(*), count(score), "
        "count(*) FILTER (WHERE unscored_reason LIKE 'judge stopped:%') "
        "FROM judgments GROUP BY judge_id ORDER BY judge_id"
    )
    by_judge = {judge: (n, scored, stopped_rows) for judge, n, scored, stopped_rows in rows}
    assert by_judge["good"] == (60, 60, 0)  # the other judge's results are stored
    for judge in ("badkey", "nomodel"):
        n, scored, stopped_rows = by_judge[judge]
        assert n == 60 and scored == 0 and stopped_rows >= 60 - STOP_AFTER - CONCURRENCY
    _, status = store.query("SELECT status FROM runs")
    assert status == [("completed",)]  # stored; a new run after the fix reuses 'good' answers


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_where_most_items_miss_the_quorum_exits_1_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-failfast")
    db = tmp_path / "run.duckdb"
    with running_stub_server() as stub:
        panel = tmp_path / "panel.yaml"
        # a server error is no reason to stop a judge, but every item then lacks its answer
        panel.write_text(
            "name: quorum\nquorum: 2\njudges:\n"
            + _judge("flaky", "openai", "stub-spans-good+500", stub.openai_base_url,
                     max_attempts=1)
            + _judge("good", "openai", "stub-spans-good", stub.openai_base_url),
            encoding="utf-8",
        )  # fmt: skip
        result = runner.invoke(app, ["run", str(SAMPLE), "--panel", str(panel), "--db", str(db)])

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    (line,) = [line for line in _lines(result) if "missed the quorum" in line]
    assert "60 of 60 items" in line and "'flaky'" in line and "provider error: server" in line
    assert not [line for line in _lines(result) if "stopped after" in line]


# -- every error a user can cause: one line, exit 2 -----------------------------------------


def _panel(tmp_path: Path, text: str) -> str:
    path = tmp_path / "panel.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _busy_port() -> tuple[socket.socket, int]:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    return taken, taken.getsockname()[1]


_BLOCK_DASK = """
import sys
from importlib.abc import MetaPathFinder

class NoDask(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("prefect_dask", "distributed", "dask"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoDask())
from juryflow.cli import main
sys.argv = ["juryflow", *sys.argv[1:]]
main()
"""

Case = Callable[[Path], list[str]]

USER_ERRORS: dict[str, tuple[Case, str]] = {
    "missing dataset file": (lambda t: ["run", str(t / "nope.jsonl")], "nope.jsonl"),
    "unknown panel file": (lambda t: ["run", "--panel", str(t / "nope.yaml")], "nope.yaml"),
    "panel YAML syntax error": (
        lambda t: ["run", "--panel", _panel(t, "judges: [\n  - {id: a\n")],
        "panel",
    ),
    "unknown judge provider": (
        lambda t: ["run", "--panel", _panel(t, "judges:\n  - {id: a, provider: acme, model: m}\n")],
        "unknown provider 'acme'; use one of: anthropic, offline, openai, recorded",
    ),
    "unknown prompt name": (
        lambda t: [
            "run",
            "--panel",
            _panel(t, "judges:\n  - {id: a, provider: openai, model: m, prompt: nope}\n"),
        ],
        "nope",
    ),
    "missing key variable": (
        lambda t: [
            "run",
            "--panel",
            _panel(
                t,
                f"judges:\n  - {{id: a, provider: openai, model: m, "
                f"prompt: data2txt_spans, api_key_env: {KEY_ENV}_UNSET}}\n",
            ),
        ],
        f"{KEY_ENV}_UNSET",
    ),
    "unknown --format value": (lambda t: ["sql", "SELECT 1", "--format", "xml"], "--format"),
    "wrong run id for reaggregate": (
        lambda t: ["reaggregate", "no-such-run", "--consensus", "majority"],
        "no-such-run",
    ),
}


@pytest.mark.parametrize("case", sorted(USER_ERRORS))
def test_user_errors_are_one_line_and_exit_2(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(f"{KEY_ENV}_UNSET", raising=False)
    monkeypatch.chdir(tmp_path)
    args, named = USER_ERRORS[case]
    result = runner.invoke(app, [*args(tmp_path), "--db", str(tmp_path / "x.duckdb")])
    assert result.exit_code == 2, (case, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = _lines(result)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert named in lines[0]


def test_a_busy_stub_server_port_is_one_line_and_exit_2() -> None:
    taken, port = _busy_port()
    with taken:
        result = runner.invoke(app, ["stub-server", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (error,) = [line for line in _lines(result) if line.startswith("error:")]
    assert str(port) in error and "--port" in error


def test_dask_without_the_extra_is_one_line_naming_the_install_and_exit_2(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BLOCK_DASK, "run", "--dask", "local",
         "--db", str(tmp_path / "x.duckdb")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'juryflow[dask]'" in lines[0], output
