from __future__ import annotations

from pathlib import Path

import pytest

from juryflow.judges.panel import DEFAULT_PANEL, PanelError, load_panel


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "panel.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_issue_example_panel_parses(tmp_path: Path) -> None:
    panel = load_panel(
        write(
            tmp_path,
            """
name: claude-gpt-local
quorum: 2
judges:
  - {id: claude, provider: anthropic, model: claude-sonnet-4-5, prompt: data2txt_spans}
  - {id: gpt, provider: openai, model: gpt-4.1, prompt: data2txt_spans, max_concurrency: 16}
  - {id: llama, provider: openai, base_url: "http://localhost:11434/v1", model: llama3.1,
     prompt: data2txt_spans, api_key_env: OLLAMA_API_KEY}
  - {id: numbers, provider: offline, detector: numbers}
""",
        )
    )
    assert panel.name == "claude-gpt-local" and panel.effective_quorum == 2
    assert [j.id for j in panel.judges] == ["claude", "gpt", "llama", "numbers"]
    assert panel.judge("gpt").max_concurrency == 16
    assert panel.judge("llama").key_env == "OLLAMA_API_KEY"
    assert panel.judge("claude").key_env == "ANTHROPIC_API_KEY"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("judges:\n  - {id: a, provider: gemini, model: x, prompt: data2txt_spans}", "provider"),
        ("judges:\n  - {id: a, provider: openai, model: x, prompt: nope}", "unknown prompt 'nope'"),
        (
            "judges:\n  - {id: a, provider: offline, detector: numbers}\n"
            "  - {id: a, provider: offline, detector: names}",
            "duplicate judge id 'a'",
        ),
        ("judges:\n  - {id: a, provider: offline, detector: dice}", "unknown detector 'dice'"),
        ("judges:\n  - {id: a, provider: openai, prompt: data2txt_spans}", "needs 'model'"),
        ("quorum: 3\njudges:\n  - {id: a, provider: offline, detector: numbers}", "quorum 3"),
        ("judges: []", "judges"),
        ("- just a list", "mapping"),
        ("judges:\n  - {id: a, provider: offline, detector: numbers, colour: red}", "colour"),
    ],
)
def test_invalid_panels_get_clear_errors(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(PanelError, match=message):
        load_panel(write(tmp_path, body))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PanelError, match="does not exist"):
        load_panel(tmp_path / "nope.yaml")


def test_default_panel_is_three_offline_detectors() -> None:
    assert load_panel(None) is DEFAULT_PANEL
    assert [j.detector for j in DEFAULT_PANEL.judges] == ["numbers", "names", "content"]
    assert DEFAULT_PANEL.effective_quorum == 2
