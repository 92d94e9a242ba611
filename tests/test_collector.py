"""The cyclic garbage collector during judging: start-up's objects frozen, then handed back."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

import juryflow.flows.evaluate as evaluate_module
from juryflow.flows.evaluate import evaluate
from juryflow.flows.runtime.collector import start_up_objects_frozen
from juryflow.planning.run_request import RunRequest
from tests.conftest import SAMPLE


def test_objects_made_before_are_frozen_inside_and_handed_back_after() -> None:
    assert gc.get_freeze_count() == 0
    with start_up_objects_frozen():
        assert gc.get_freeze_count() > 0
        made_inside = [[]]  # a young object: collected as usual
        assert gc.is_tracked(made_inside)
    assert gc.get_freeze_count() == 0


def test_a_run_judges_with_start_up_objects_frozen(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen_while_judging: list[int] = []
    original = evaluate_module.judge_dataset

    async def watched(*args: Any) -> Any:
        frozen_while_judging.append(gc.get_freeze_count())
        return await original(*args)

    monkeypatch.setattr(evaluate_module, "judge_dataset", watched)
    subset = tmp_path / "subset.jsonl"
    subset.write_text("\n".join(SAMPLE.read_text().splitlines()[:5]) + "\n")
    summary = asyncio.run(evaluate(RunRequest(dataset=str(subset), db=str(db_path))))
    assert summary["items"] == 5
    # Prefect's, pydantic's and juryflow's modules at least: far more than the run makes.
    assert frozen_while_judging and frozen_while_judging[0] > 10_000
    assert gc.get_freeze_count() == 0
