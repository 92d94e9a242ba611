"""Make examples/ragtruth_pairs_sample.jsonl: two candidate answers per input, from the
bundled RAGTruth data-to-text sample (each source there was answered by six models).

Each source gives three pairs (`PAIRS`, answer A the first model); a row keeps both answers,
their models, the source's reference data as `input`, and `preferred`: which answer the
human span labels favour (fewer hallucinated characters; `tie` when equal), a label the
pairwise views can compare judges with. Deterministic: the file is checked in and
tests/test_pairwise_runs.py checks this script still writes it byte for byte.

    .venv/bin/python scripts/make_pairwise_sample.py [OUT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "examples" / "ragtruth_data2txt_sample.jsonl"
OUT = ROOT / "examples" / "ragtruth_pairs_sample.jsonl"
PAIRS = (
    ("gpt-4-0613", "gpt-3.5-turbo-0613"),
    ("llama-2-70b-chat", "llama-2-7b-chat"),
    ("mistral-7B-instruct", "llama-2-13b-chat"),
)


def hallucinated_chars(row: dict[str, object]) -> int:
    """Characters the human labels mark, overlapping labels counted once."""
    marked: set[int] = set()
    for label in row.get("labels") or []:  # type: ignore[union-attr]
        marked.update(range(int(label["start"]), int(label["end"])))
    return len(marked)


def preferred(a: dict[str, object], b: dict[str, object]) -> str:
    ca, cb = hallucinated_chars(a), hallucinated_chars(b)
    return "A" if ca < cb else "B" if cb < ca else "tie"


def pairs(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    by_source: dict[str, dict[str, dict[str, object]]] = {}
    for row in rows:
        by_source.setdefault(str(row["source_id"]), {})[str(row["model"])] = row
    out = []
    for source_id, models in by_source.items():
        for model_a, model_b in PAIRS:
            a, b = models[model_a], models[model_b]
            out.append(
                {
                    "id": f"{source_id}-{model_a}-vs-{model_b}",
                    "source_id": source_id,
                    "input": a["reference"],
                    "response_a": a["response"],
                    "response_b": b["response"],
                    "model_a": model_a,
                    "model_b": model_b,
                    "preferred": preferred(a, b),
                }
            )
    return out


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else OUT
    with SOURCE.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in pairs(rows))
    out.write_text(text, encoding="utf-8")
    print(f"{out}: {text.count(chr(10))} pairs")


if __name__ == "__main__":
    main(sys.argv[1:])
