"""Panel files of the stand-in's simulated span judges, for the end-to-end run tests."""

from __future__ import annotations

from pathlib import Path

from juryflow.standin.server import StubHandle

STRONG = "stub-sim-spans-r0.8-f0.1-j0.2-n0.1"
MEDIUM = "stub-sim-spans-r0.6-f0.3-j0.3-n0.2"
WEAK = "stub-sim-spans-r0.4-f0.5-j0.4-n0.2-o0.3-b0.05"

THREE_JUDGES: tuple[tuple[str, str, str], ...] = (
    ("strong", "anthropic", STRONG),
    ("medium", "openai", MEDIUM),
    ("weak", "openai", WEAK),
)
"""``(id, provider, model)``: one good, one middling and one poor span judge."""

DECISION = (
    "SELECT c.item_id, c.status, c.score_median, c.hallucinated, c.unlocalised, "
    "c.verdict_rule, list((s.char_start, s.char_end, s.text) ORDER BY s.char_start) "
    "FILTER (WHERE s.item_id IS NOT NULL) "
    "FROM consensus c LEFT JOIN consensus_spans s USING (run_id, item_id) "
    "WHERE c.run_id = ? GROUP BY ALL ORDER BY c.item_id"
)
"""What a run decided per item (status, scores, verdict, consensus spans), to compare two
runs' consensus: bound to the run id."""


def sim_panel(
    path: Path,
    stub: StubHandle,
    judges: tuple[tuple[str, str, str], ...] = THREE_JUDGES,
    *,
    key_env: str,
    name: str = "sim-3span",
    priced: bool = False,
    extra: str = "",
) -> Path:
    """Write a panel of ``(id, provider, model)`` judges on ``stub``, their key read from
    ``key_env``; ``priced``: every model at $1 in, $4 out per million tokens (otherwise
    unpriced, as stub models are); ``extra``: YAML appended as it is."""
    lines = [f"name: {name}"]
    if priced:
        lines.append("prices:")
        lines += [f"  '{model}': {{input: 1.0, output: 4.0}}" for _, _, model in judges]
    lines.append("judges:")
    for judge_id, provider, model in judges:
        url = stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url
        lines.append(
            f"  - {{id: {judge_id}, provider: {provider}, model: '{model}', "
            f"prompt: data2txt_spans, base_url: '{url}', api_key_env: {key_env}}}"
        )
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path
