"""Secrets stay secret: redaction of echoed headers and URL credentials, key routing, modes.

Each attack of issue 10 ("secrets") is reproduced first: the stub server really receives
the secret and really echoes it (the ``echo`` fault quotes every request header), and the
test then looks for it everywhere juryflow records something. test_security.py plants one
key; this module plants every kind of credential a panel can carry.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.judges.factory import build_judge, check_keys
from juryflow.judges.keys import PLACEHOLDER_KEY, MaskedCredentialsError, resolve_api_key
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec, PanelSpec, parse_panel
from juryflow.judges.providers.base import ProviderError
from juryflow.judges.ratelimit import reset_limiters
from juryflow.judges.redact import (
    MASK,
    known_secrets,
    redact_text,
    redact_url,
    remember_secret,
    url_secrets,
)
from juryflow.judges.retry import RetriesExhausted
from juryflow.maths.records import Item, unscored
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.connection import connect
from juryflow.storage.files import current_umask, private_file, private_files, write_private_text
from juryflow.storage.journal import Journal
from juryflow.storage.store import Store
from tests.conftest import SAMPLE

runner = CliRunner()

KEY = "sk-jf-PLANTEDKEY-5c1d2e3f4a5b6c7d8e9f"
DEFAULT_KEY = "sk-ant-DEFAULTKEY-0a1b2c3d4e5f6a7b8c9d"
PASSWORD = "Pa55-w0rd-QQ71"
PASSWORD2 = "Hunter-2-ZZ93"
QUERY_SECRET = "QSECRET-8d7c6b5a4f3e"
HEADER_SECRET = "HDR-SECRET-41c2d9e8"
ITEM = Item("i1", {"input": "What is in the repo?", "output": "main.py and a.py."})


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Iterator[None]:
    reset_limiters()
    yield
    reset_limiters()


_OPEN: list[LLMJudge] = []


@pytest.fixture(autouse=True)
async def _close_judges() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


@pytest.fixture
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig()) as handle:
        yield handle


def _judge(**spec: Any) -> LLMJudge:
    judge = build_judge(
        JudgeSpec(id="j", prompt="hallucination_score", timeout=5.0, max_attempts=2, **spec), {}
    )
    assert isinstance(judge, LLMJudge)
    judge.base_delay = judge.max_delay = 0.001
    _OPEN.append(judge)
    return judge


def _with_credentials(url: str, user: str, password: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{user}:{password}@{rest}"


def _sent(stub: StubHandle) -> str:
    """Every request target and header value the stub received, as one text."""
    return "\n".join(
        target + " " + " ".join(headers.values()) for target, headers in stub.stats.requests_seen()
    )


# --- the redactor ------------------------------------------------------------------------


def test_redact_url_masks_userinfo_and_key_like_query_values() -> None:
    url = (
        f"https://alice:{PASSWORD}@gw.example.test:8443/v1?api_key={QUERY_SECRET}"
        "&model=x&X-Amz-Signature=abc123&access_token=t0k&page=2"
    )
    masked = redact_url(url)
    assert masked == (
        "https://***@gw.example.test:8443/v1?api_key=***&model=x"
        "&X-Amz-Signature=***&access_token=***&page=2"
    )
    assert redact_url("http://127.0.0.1:8765/v1") == "http://127.0.0.1:8765/v1"
    assert PASSWORD not in redact_url(f"http://[::1:{PASSWORD}@broken")  # unparseable URL


def test_redact_text_removes_given_known_and_shaped_secrets() -> None:
    remember_secret("remembered-value-93af")
    text = (
        f"401 from https://bob:{PASSWORD}@h.test/v1?token={QUERY_SECRET}: "
        f"{{'authorization': 'Bearer {KEY}', 'x-api-key': '{DEFAULT_KEY}', 'host': 'h'}}; "
        "Authorization: Basic Ym9iOkh1bnRlcjIy; x-upstream-token: raw-token-77; "
        "Cookie: session=s3cr3t; other=1\n"
        f"Incorrect API key provided: sk-...{KEY[-8:]}; "
        f"key ghp_{'a1' * 12} and {HEADER_SECRET} and remembered-value-93af"
    )
    clean = redact_text(text, [HEADER_SECRET, KEY])
    for secret in (
        PASSWORD, QUERY_SECRET, KEY, KEY[-8:], DEFAULT_KEY, "Ym9iOkh1bnRlcjIy", "raw-token-77",
        "s3cr3t", "other=1", "a1" * 12, HEADER_SECRET, "remembered-value-93af",
    ):  # fmt: skip
        assert secret not in clean, secret
    assert "'host': 'h'" in clean and "401 from https://***@h.test/v1" in clean


def test_redact_text_leaves_ordinary_messages_alone() -> None:
    for message in (
        "rate_limit (HTTP 429): stub: rate limited",
        "Token limit exceeded: 5000 > 4096 tokens",
        "Basic information was missing from the answer",
        "task-management-service answered 500",
        "unparseable output: no score in the answer",
        "authentication_error: invalid x-api-key",
    ):
        assert redact_text(message) == message


def test_url_secrets_include_the_basic_header_httpx_derives() -> None:
    found = url_secrets(f"http://alice:{PASSWORD}@h.test/v1?api_key={QUERY_SECRET}&a=b")
    assert PASSWORD in found and QUERY_SECRET in found and "b" not in found
    assert "YWxpY2U6UGE1NS13MHJkLVFRNzE=" in found  # base64("alice:" + PASSWORD)


def test_provider_and_retry_errors_are_redacted_where_they_are_built() -> None:
    remember_secret(KEY)
    error = ProviderError(f"echo: Authorization: Bearer {KEY}", retryable=True, kind="server")
    assert KEY not in error.message and KEY not in str(error)
    assert KEY not in str(RetriesExhausted(error, 3))


# --- key routing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
async def test_default_key_never_travels_to_a_custom_base_url(
    stub: StubHandle, monkeypatch: pytest.MonkeyPatch, provider: str, variable: str
) -> None:
    """The real SDK against the stub with the provider's own key set: the server never sees it."""
    monkeypatch.setenv(variable, DEFAULT_KEY)
    url = stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url
    judge = _judge(provider=provider, model="stub-score-0.6", base_url=url)
    judgment = await judge.judge(ITEM)

    assert judgment.score == 0.6  # the placeholder key is enough for a keyless server
    sent = _sent(stub)
    assert stub.stats.requests_seen(), "the stub recorded no request"
    assert DEFAULT_KEY not in sent and DEFAULT_KEY[-8:] not in sent
    assert PLACEHOLDER_KEY in sent


async def test_default_key_is_sent_where_the_panel_names_it(
    stub: StubHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", DEFAULT_KEY)
    judge = _judge(
        provider="anthropic",
        model="stub-score-0.6",
        base_url=stub.anthropic_base_url,
        api_key_env="ANTHROPIC_API_KEY",
    )
    assert (await judge.judge(ITEM)).score == 0.6
    assert DEFAULT_KEY in _sent(stub)  # the recorder sees keys: the test above is meaningful


@pytest.mark.parametrize(
    ("base_url", "gets_default_key"),
    [
        (None, True),
        ("https://api.anthropic.com", True),
        ("https://api.anthropic.com:443/", True),
        ("http://api.anthropic.com", False),
        ("https://api.anthropic.com.evil.test", False),
        ("https://api.anthropic.com@evil.test", False),
        ("https://evil.test/?host=api.anthropic.com", False),
        ("https://api.openai.com/v1", False),
        ("http://[::1", False),
    ],
)
def test_only_the_providers_own_server_gets_the_default_key(
    monkeypatch: pytest.MonkeyPatch, base_url: str | None, gets_default_key: bool
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", DEFAULT_KEY)
    spec = JudgeSpec(
        id="c", provider="anthropic", model="m", prompt="hallucination_score", base_url=base_url
    )
    expected = DEFAULT_KEY if gets_default_key else PLACEHOLDER_KEY
    assert resolve_api_key(spec) == expected


# --- echoed headers and URL credentials in judgments ---------------------------------------


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_echoed_headers_never_reach_an_unscored_reason(
    stub: StubHandle, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setenv("JURYFLOW_SECRET_KEY", KEY)
    url = stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url
    headers = {"X-Upstream-Token": HEADER_SECRET, "X-Team": "team-secret-value"}
    plain = _judge(
        provider=provider,
        model="stub-score-0.6+echo",
        base_url=url,
        api_key_env="JURYFLOW_SECRET_KEY",
        headers=headers,
    )
    with_userinfo = _judge(
        provider=provider,
        model="stub-score-0.6+echo",
        base_url=_with_credentials(url, "alice", PASSWORD),
        api_key_env="JURYFLOW_SECRET_KEY",
    )
    reasons = [
        (await plain.judge(ITEM)).unscored_reason or "",
        (await with_userinfo.judge(ITEM)).unscored_reason or "",
    ]

    sent = _sent(stub)
    for secret in (KEY, HEADER_SECRET, "team-secret-value", "YWxpY2U6UGE1NS13MHJkLVFRNzE="):
        assert secret in sent, f"attack not reproduced: {secret} was never sent"
    for reason in reasons:
        assert reason.startswith("provider error after 1 attempt: client: ") and MASK in reason
        for secret in (KEY, KEY[-8:], HEADER_SECRET, "team-secret-value", PASSWORD, "YWxpY2U6"):
            assert secret not in reason, secret


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_sdk_debug_logs_show_no_url_credentials(
    stub: StubHandle,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    provider: str,
) -> None:
    """At DEBUG the SDKs and httpx log every request's URL, userinfo included."""
    monkeypatch.setenv("JURYFLOW_SECRET_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    url = stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url
    judge = _judge(
        provider=provider,
        model="stub-score-0.6",
        base_url=_with_credentials(url, "alice", PASSWORD),
        api_key_env="JURYFLOW_SECRET_KEY",
    )
    await judge.judge(ITEM)
    messages = [record.getMessage() for record in caplog.records]
    assert any("http://***@127.0.0.1" in m for m in messages), "no request URL was logged"
    for message in messages:
        assert PASSWORD not in message and KEY not in message


def test_stored_panel_masks_url_credentials_and_header_values() -> None:
    url = f"https://alice:{PASSWORD}@gw.example.test/v1?api_key={QUERY_SECRET}&region=eu"
    panel = PanelSpec(
        judges=(
            JudgeSpec(
                id="g",
                provider="openai",
                model="m",
                prompt="hallucination_score",
                base_url=url,
                headers={"X-Upstream-Token": HEADER_SECRET},
            ),
        )
    )
    stored = repr(panel.public_dict())
    for secret in (PASSWORD, QUERY_SECRET, HEADER_SECRET, "alice"):
        assert secret not in stored
    (judge,) = panel.public_dict()["judges"]
    assert judge["base_url"] == "https://***@gw.example.test/v1?api_key=***&region=eu"
    assert judge["headers"] == {"X-Upstream-Token": "<redacted>"}
    # the cache key, stored with every judgment, hashes no password either
    assert PASSWORD not in repr(panel.judges[0].call_parameters())


def test_a_judge_rebuilt_from_a_masked_panel_is_refused_not_sent_stars(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--resume rebuilds the panel from runs.panel, whose credentials are masked."""
    monkeypatch.setenv("JURYFLOW_SECRET_KEY", KEY)
    for extra in (
        {"base_url": f"http://alice:{PASSWORD}@127.0.0.1:9/v1"},
        {"base_url": f"http://127.0.0.1:9/v1?api_key={QUERY_SECRET}"},
        {"base_url": "http://127.0.0.1:9/v1", "headers": {"X-Upstream-Token": HEADER_SECRET}},
    ):
        original = PanelSpec(
            judges=(
                JudgeSpec(
                    id="g",
                    provider="openai",
                    model="m",
                    prompt="hallucination_score",
                    api_key_env="JURYFLOW_SECRET_KEY",
                    **extra,
                ),
            )
        )
        assert resolve_api_key(original.judges[0]) == KEY
        rebuilt = parse_panel(original.public_dict(), "run r1")
        with pytest.raises(MaskedCredentialsError, match="start a new run with the panel file"):
            check_keys(rebuilt)


# --- files --------------------------------------------------------------------------------


def test_store_and_its_wal_are_created_private(tmp_path: Path) -> None:
    before = current_umask()
    db = tmp_path / "s.duckdb"
    Store(db).migrate()
    assert _mode(db) == 0o600
    wal = db.with_name(db.name + ".wal")
    with connect(db) as con:
        con.execute("CREATE TABLE t (x VARCHAR)")
        con.execute("INSERT INTO t VALUES ('x')")
        assert wal.exists(), "DuckDB wrote no WAL: this test checks nothing"
        assert _mode(wal) == 0o600
    assert current_umask() == before  # the process umask comes back


def test_private_files_nest_and_restore_the_umask_across_threads() -> None:
    before = current_umask()
    done = threading.Barrier(3)

    def worker() -> None:
        with private_files():
            done.wait()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    with private_files():
        done.wait()
        assert current_umask() & 0o077 == 0o077
    for thread in threads:
        thread.join()
    assert current_umask() == before


def test_report_and_journal_respect_a_stricter_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)
    try:
        report = tmp_path / "r.html"
        write_private_text(report, "<p>x</p>")
        journal = Journal(tmp_path / "db.journal" / "run.jsonl")
        journal.append(unscored("i", "j", "score", "reason"))
        journal.close()
    finally:
        os.umask(old)
    assert _mode(report) == 0o400
    assert _mode(journal.path) == 0o400


def test_an_existing_readable_report_is_replaced_by_a_private_one(tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    report.write_text("old", encoding="utf-8")
    report.chmod(0o644)
    write_private_text(report, "new")
    assert report.read_text(encoding="utf-8") == "new" and _mode(report) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temporary left behind


def test_private_file_tightens_and_never_loosens(tmp_path: Path) -> None:
    loose, strict = tmp_path / "loose", tmp_path / "strict"
    for path, mode in ((loose, 0o664), (strict, 0o400)):
        path.write_text("x", encoding="utf-8")
        path.chmod(mode)
        private_file(path)
    assert _mode(loose) == 0o600 and _mode(strict) == 0o400


def test_journal_is_private_and_holds_no_echoed_secret(tmp_path: Path) -> None:
    remember_secret(KEY)
    journal = Journal(tmp_path / "s.duckdb.journal" / "run.jsonl")
    journal.append(unscored("i", "j", "score", f"echo: x-api-key: {KEY}"))
    journal.close()
    assert _mode(journal.path) == 0o600 and _mode(journal.path.parent) == 0o700
    text = journal.path.read_text(encoding="utf-8")
    assert KEY not in text and "x-api-key: ***" in text
    (replayed,) = journal.replay()
    assert replayed.unscored_reason == "echo: x-api-key: ***"


def test_journal_already_present_with_a_loose_mode_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "j" / "run.jsonl"
    path.parent.mkdir()
    path.write_text("", encoding="utf-8")
    path.chmod(0o644)
    journal = Journal(path)
    journal.append(unscored("i", "j", "score", "reason"))
    journal.close()
    assert _mode(path) == 0o600


# --- a whole run through the command line ---------------------------------------------------


class _Watcher:
    """Polls the store's directory during a run: file modes seen, journal text captured."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.modes: dict[str, set[int]] = {}
        self.journal_text: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Watcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            for path in self.directory.rglob("*"):
                try:
                    mode = _mode(path)
                    if path.suffix == ".jsonl":
                        self.journal_text[path.name] = path.read_text(encoding="utf-8")
                except OSError:  # deleted between listing and reading: a checkpoint's WAL
                    continue
                self.modes.setdefault(str(path.relative_to(self.directory)), set()).add(mode)
            time.sleep(0.002)


@pytest.mark.usefixtures("prefect_harness")
def test_no_secret_of_a_panel_reaches_any_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("JURYFLOW_SECRET_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", DEFAULT_KEY)
    dataset = tmp_path / "items.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:6]
    dataset.write_text("".join(lines), encoding="utf-8")
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    db = store_dir / "secrets.duckdb"
    report = tmp_path / "report.html"
    caplog.set_level(logging.DEBUG)
    before = current_umask()

    with running_stub_server(StubConfig(latency_ms=40)) as stub:
        host = stub.base_url.removeprefix("http://")
        panel = tmp_path / "panel.yaml"
        panel.write_text(
            "name: secrets\njudges:\n"
            # every request echoed: the Basic header from user:pass@, and a custom header
            f"  - {{id: a, provider: anthropic, model: 'stub-spans-good+echo', "
            f"prompt: data2txt_spans, base_url: 'http://alice:{PASSWORD}@{host}', "
            "api_key_env: JURYFLOW_SECRET_KEY, "
            f"headers: {{X-Upstream-Token: '{HEADER_SECRET}'}}}}\n"
            # the named key, echoed as "authorization: Bearer ..." twice
            f"  - {{id: b, provider: openai, model: 'stub-score-0.6+echox2', "
            f"prompt: hallucination_score, base_url: '{stub.openai_base_url}', "
            "api_key_env: JURYFLOW_SECRET_KEY}\n"
            # no api_key_env: ANTHROPIC_API_KEY must stay home
            f"  - {{id: c, provider: anthropic, model: 'stub-spans-good+echox1', "
            f"prompt: data2txt_spans, base_url: '{stub.anthropic_base_url}'}}\n"
            # credentials in the URL and its query (sent with every call), and a model the
            # server does not know: every call fails with a 404, which stops the judge
            f"  - {{id: q, provider: openai, model: 'stub-score-0.6+404', "
            "prompt: hallucination_score, "
            f"base_url: 'http://carol:{PASSWORD2}@{host}/v1?api_key={QUERY_SECRET}', "
            "api_key_env: JURYFLOW_SECRET_KEY}\n"
            "  - {id: n, provider: offline, detector: numbers}\n",
            encoding="utf-8",
        )
        with _Watcher(store_dir) as watcher:
            result = runner.invoke(
                app, ["run", str(dataset), "--panel", str(panel), "--db", str(db), "--verbose"]
            )
        # 1: judge q is stopped (its every call is a 404), and its line must leak nothing
        assert result.exit_code == 1, result.output
        reported = runner.invoke(app, ["report", "--db", str(db), "-o", str(report)])
        assert reported.exit_code == 0, reported.output
        sent = _sent(stub)

    # the attacks really happened: every secret but the default key went over the wire
    for secret in (KEY, HEADER_SECRET, "YWxpY2U6UGE1NS13MHJkLVFRNzE=", QUERY_SECRET):
        assert secret in sent, f"attack not reproduced: {secret} was never sent"
    assert DEFAULT_KEY not in sent, "ANTHROPIC_API_KEY went to a server the panel did not name"
    journal_seen = "\n".join(watcher.journal_text.values())
    assert '"judge_id":"a"' in journal_seen, "no LLM judgment seen in the journal: check is void"

    store = Store(db)
    outputs: dict[str, str] = {
        "cli output": result.output + reported.output,
        "logs": "\n".join(
            r.getMessage() + (logging.Formatter().formatException(r.exc_info) if r.exc_info else "")
            for r in caplog.records
        ),
        "report": report.read_text(encoding="utf-8"),
        "database file": db.read_bytes().decode("latin-1"),
        "artifacts": asyncio.run(_artifact_text()),
    }
    outputs.update({f"journal {name}": text for name, text in watcher.journal_text.items()})
    _, tables = store.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
    )
    for (table,) in tables:
        _, rows = store.query(f'SELECT * FROM "{table}"')  # names come from the catalog
        outputs[f"table {table}"] = repr(rows)

    _, reasons = store.query(
        "SELECT judge_id, unscored_reason FROM judgments WHERE unscored_reason IS NOT NULL"
    )
    assert {judge for judge, _ in reasons} >= {"a", "b", "c", "q"}
    assert any(MASK in reason for _, reason in reasons)
    secrets = (KEY, DEFAULT_KEY, PASSWORD, PASSWORD2, QUERY_SECRET, HEADER_SECRET)
    for where, text in outputs.items():
        for secret in (*secrets, "YWxpY2U6UGE1NS13MHJkLVFRNzE=", KEY[-8:]):
            assert secret not in text, f"{secret} leaked into {where}"

    # files: owner-only, as created and as seen during the run
    assert _mode(db) == 0o600 and _mode(report) == 0o600
    for name, modes in watcher.modes.items():
        expected = 0o700 if (store_dir / name).is_dir() or name.endswith(".journal") else 0o600
        if name.endswith(".tmp"):  # DuckDB's spill directory
            expected = 0o700
        assert modes == {expected}, f"{name} was {sorted(oct(m) for m in modes)}"
    assert any(name.endswith(".jsonl") for name in watcher.modes)
    assert current_umask() == before


async def _artifact_text() -> str:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        artifacts = await client.read_artifacts()
    return "\n".join(repr(a.data) + repr(a.description) for a in artifacts)


@pytest.mark.usefixtures("prefect_harness")
def test_a_failed_runs_error_is_stored_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No path of today's flow puts a URL in runs.error, so a failure is injected that does."""
    import juryflow.flows.evaluate as evaluate_module

    url = f"http://alice:{PASSWORD}@gw.example.test/v1?api_key={QUERY_SECRET}"

    async def failing(*_: object, **__: object) -> None:
        raise RuntimeError(f"POST {url} failed; sent authorization: Bearer {KEY}")

    monkeypatch.setattr(evaluate_module, "judge_dataset", failing)
    db = tmp_path / "f.duckdb"
    with pytest.raises(RuntimeError):
        asyncio.run(evaluate_module.evaluate(RunRequest(db=str(db))))
    _, rows = Store(db).query("SELECT status, error FROM runs")
    ((status, error),) = rows
    assert status == "failed"
    assert "http://***@gw.example.test/v1?api_key=***" in error
    for secret in (PASSWORD, QUERY_SECRET, KEY):
        assert secret not in error


def test_known_secrets_never_include_the_placeholder() -> None:
    assert PLACEHOLDER_KEY not in known_secrets()
