"""A run resumed after a new prompt version became the default keeps the version it started
with (issue 24: data2txt_spans v2 sends the instructions first for prompt caching)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from juryflow.judges.panel import parse_panel
from juryflow.planning.run_setup import _pinned_prompts
from juryflow.storage.store import RunRecord


def _panel(prompt: str) -> Any:
    return parse_panel(
        {
            "judges": [
                {
                    "id": "a",
                    "provider": "anthropic",
                    "model": "claude-sonnet-4-5",
                    "prompt": prompt,
                },
                {"id": "n", "provider": "offline", "detector": "numbers"},
            ]
        }
    )


def test_a_run_begun_on_v1_resumes_on_v1() -> None:
    run = cast(RunRecord, SimpleNamespace(prompts=[{"name": "data2txt_spans", "version": 1}]))
    pinned = _pinned_prompts(_panel("data2txt_spans"), run)
    assert pinned.judges[0].prompt == "data2txt_spans@v1"
    assert pinned.judges[0].template().ref == "data2txt_spans@v1"
    assert pinned.judges[1].prompt is None


def test_an_explicit_version_and_a_run_without_records_are_left_alone() -> None:
    run = cast(RunRecord, SimpleNamespace(prompts=[{"name": "data2txt_spans", "version": 1}]))
    assert _pinned_prompts(_panel("data2txt_spans@v2"), run).judges[0].prompt == (
        "data2txt_spans@v2"
    )
    bare = cast(RunRecord, SimpleNamespace(prompts=[]))
    assert _pinned_prompts(_panel("data2txt_spans"), bare).judges[0].prompt == "data2txt_spans"
