"""The dataset of a head-to-head regression: each item's baseline answer against the new
run's answer, for a pairwise panel to judge.

Items are paired by id. The answer is the item's ``response`` variable (else ``output``);
everything else the judges saw (the reference data, the question) becomes the pair's
``input``: the one other variable as it is, several as ``name: value`` paragraphs. Answer A
is the baseline's and B the candidate's, so B's win share is the candidate's (0.5: as good
as the baseline); ``model_a`` / ``model_b`` name the two runs. The rows are written as JSON
Lines for ``evaluate``, which stores the file's path and hash as any dataset's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from juryflow.storage.reads.analysis import GROUP_COLUMNS
from juryflow.storage.store import Store

ANSWER_VARIABLES = ("response", "output")
"""The item variable holding the judged answer, tried in this order."""


def pairs_file_name(baseline_id: str, candidate_id: str) -> str:
    """The pairs file of two runs: the head-to-head run's dataset, by which the viewer's
    comparison of the two finds that run again."""
    return f"{baseline_id}-vs-{candidate_id}.jsonl"


class PairingError(ValueError):
    """The two runs cannot be compared head to head, with a message naming the fix."""


def _answer_variable(variables: Mapping[str, str]) -> str | None:
    return next((name for name in ANSWER_VARIABLES if name in variables), None)


def pair_input(variables: Mapping[str, str], answer: str) -> str:
    """What the judges saw besides the answer, as one text."""
    rest = {k: v for k, v in variables.items() if k != answer}
    if len(rest) == 1:
        return str(next(iter(rest.values())))
    return "\n\n".join(f"{name}: {value}" for name, value in rest.items())


def head_to_head_rows(
    baseline: Mapping[str, Mapping[str, str]],
    candidate: Mapping[str, Mapping[str, str]],
    names: tuple[str, str],
    groups: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """One pair per item id in both runs (candidate's order), A the baseline's answer."""
    rows = []
    for item_id, new in candidate.items():
        old = baseline.get(item_id)
        if old is None:
            continue
        answer = _answer_variable(new)
        if answer is None or answer not in old:
            continue
        rows.append(
            {
                "id": item_id,
                "source_id": (groups or {}).get(item_id, item_id),
                "input": pair_input(new, answer),
                "response_a": str(old[answer]),
                "response_b": str(new[answer]),
                "model_a": names[0],
                "model_b": names[1],
            }
        )
    return rows


def write_head_to_head(store: Store, baseline_id: str, candidate_id: str, path: Path) -> int:
    """Write the pairs of ``baseline_id`` against ``candidate_id`` to ``path``; their count.
    Raises PairingError when no item of the two runs can be paired."""
    baseline = {item.item_id: item.variables for item in store.load_items(baseline_id)}
    items = store.load_items(candidate_id)
    candidate = {item.item_id: item.variables for item in items}
    groups = {
        item.item_id: str(source)
        for item in items
        if (source := next((item.metadata[c] for c in GROUP_COLUMNS if c in item.metadata), None))
        is not None
    }
    rows = head_to_head_rows(baseline, candidate, (baseline_id, candidate_id), groups)
    if not rows:
        raise PairingError(
            f"runs {baseline_id} and {candidate_id} share no item id with a 'response' (or "
            "'output') to compare head to head; compare runs of the same suite"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
    )
    return len(rows)
