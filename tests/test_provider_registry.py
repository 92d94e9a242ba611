"""Issue 41, point 3: a provider is one module (plus its prices), read through the registry.

``tests/toy_provider.py`` is such a module, written from scratch on httpx; importing it is
all it takes for a panel to name it, for the factory to build it, for its key, host,
prices and family to be used, and for a run to judge with it against the stand-in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from juryflow.judges.keys import resolve_api_key, uses_default_server
from juryflow.judges.panel import JudgeSpec, PanelError, parse_panel
from juryflow.judges.pricing import cached_prefix_tokens, price_for
from juryflow.judges.providers.families import judge_family
from juryflow.judges.providers.registry import (
    provider_names,
    register_provider,
    registered_provider,
)
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from tests import toy_provider
from tests.conftest import SAMPLE


def test_the_built_in_providers_are_registered_by_their_modules_alone() -> None:
    assert {"anthropic", "openai"} <= set(provider_names())
    anthropic = registered_provider("anthropic")
    assert anthropic.key_env == "ANTHROPIC_API_KEY"
    assert anthropic.default_host == "api.anthropic.com"
    assert "claude-sonnet-4-5" in anthropic.prices
    assert registered_provider("openai").family is None  # any open model may sit behind it


def test_a_misspelt_provider_is_one_line_naming_the_known_ones_and_the_close_one() -> None:
    with pytest.raises(PanelError) as caught:
        parse_panel({"judges": [{"id": "a", "provider": "antropic", "model": "m", "prompt": "x"}]})
    message = str(caught.value)
    assert "unknown provider 'antropic' (did you mean 'anthropic'?)" in message
    assert "toyllm" in message and "offline" in message and "\n" not in message.strip()


def test_a_provider_name_cannot_be_taken_twice_or_shadow_offline() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        register_provider("toyllm", key_env="X", default_host="x.example")(type("Other", (), {}))
    with pytest.raises(ValueError, match="call no model"):
        register_provider("offline", key_env="X", default_host="x.example")


def test_the_toy_providers_facts_are_read_where_juryflow_needs_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own = JudgeSpec(id="t", provider="toyllm", model="toy-judge-1", prompt="data2txt_spans")
    assert own.key_env == "TOYLLM_API_KEY"
    assert uses_default_server(own.model_copy(update={"base_url": "https://api.toyllm.example"}))
    monkeypatch.setenv("TOYLLM_API_KEY", "toy-key-0123456789")
    assert resolve_api_key(own) == "toy-key-0123456789"
    elsewhere = own.model_copy(update={"base_url": "http://127.0.0.1:9/v1"})
    assert resolve_api_key(elsewhere) == "not-needed"  # the key never travels elsewhere
    assert price_for("toy-judge-1-20261129") == toy_provider.PRICES["toy-judge-1"]
    assert judge_family("toyllm", "toy-judge-1", None) == "toy"
    assert cached_prefix_tokens("toyllm", "toy-judge-1", None, 5000) is None


@pytest.fixture
def stub() -> Iterator[StubHandle]:
    with running_stub_server(StubConfig(latency_ms=1)) as handle:
        yield handle


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_judges_with_the_toy_provider_against_the_stand_in_and_prices_it(
    stub: StubHandle, db_path: Path, tmp_path: Path
) -> None:
    from juryflow.flows.evaluate import evaluate

    subset = tmp_path / "subset.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:6]
    subset.write_text("".join(lines), encoding="utf-8")
    panel = tmp_path / "panel.yaml"
    panel.write_text(
        f"""
judges:
  - id: toy
    provider: toyllm
    model: toy-judge-1
    prompt: data2txt_spans
    base_url: "{stub.openai_base_url}"
    structured_output: false
  - {{id: numbers, provider: offline, detector: numbers}}
""",
        encoding="utf-8",
    )
    summary = asyncio.run(
        evaluate(RunRequest(dataset=str(subset), panel=str(panel), db=str(db_path)))
    )
    assert stub.stats.requests("toy-judge-1") == 6
    _, rows = Store(db_path).query(
        "SELECT count(*), count(score), sum(input_tokens), sum(output_tokens), sum(cost_usd) "
        "FROM judgments WHERE run_id = ? AND judge_id = 'toy'",
        [summary["run_id"]],
    )
    judged, scored, tokens_in, tokens_out, cost = rows[0]
    assert judged == 6 and scored == 6
    assert cost == pytest.approx((tokens_in * 2.0 + tokens_out * 4.0) / 1_000_000)
