"""Time redact_text and a judge's answer path on long model answers (issue 29, point 7).

For each shape and size (1 M, 10 M, 30 M characters by default) it prints the best time of
``--repeats`` runs of ``redact_text`` and, per shape, the growth: time per character at the
largest size over time per character at the smallest, ~1 for linear (a quadratic pass
would give 30). Before issue 29 the adversarial shapes took 4.8 s at 60,000 characters and
never finished at 250,000. Target: 30 M characters in under a second.

Then the answer path, ``LLMJudge._judgment`` (no HTTP: the answer as the SDK hands it over):
at those sizes an answer is over the limit (``MAX_ANSWER_CHARS``) and only its first 2 x
limit characters are redacted; at the limit itself, the adversarial answers that pass it are
redacted, parsed and anchored in full (many spans, repeated and distinct near misses,
broken and nested braces, an unclosed fence before spaces).

Shapes: ``prose`` (the bundled sample's responses, cycled), ``prose+secrets`` (the same
with a URL carrying a key, an ``X-Api-Key`` header line, a Bearer token and an ``sk-`` key
every 10,000 characters: every pass has work), ``json answer`` (the seed spans prompt's
answer shape, cycled) and the adversarial runs that made the old patterns rescan: letters,
``x-x-x-``, ``x-keykey``, ``sk-sk-sk-``, ``a=a=a`` in a URL query, a URL path without ``=``,
quotes, ``Basic Basic``, spaces. A long text is redacted only in the pieces, cut after
``.\\n``, that hold a hint of some pattern; two shapes would make that pay without gain:
``.\\n`` every 2 characters (cuts, no hint) and ``AKIA.\\n`` (a hint in every piece).
"Beyond the target" times ``prose+secrets`` without any ``.\\n``, and ``sk-1`` or
``cookie.\\n`` every few characters.

Run: .venv/bin/python bench/bench_redact.py [--sizes 1000000,10000000,30000000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import MAX_ANSWER_CHARS, LLMJudge, _CallTimer
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.base import ModelResponse
from juryflow.judges.redact import redact_text
from juryflow.maths.records import Item

TARGET_SECONDS = 1.0
TARGET_SIZE = 30_000_000
SECRET = "sk-proj-Zq7x31c4a9b8c7d6e5f4"


SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ragtruth_data2txt_sample.jsonl"


def _sample_rows() -> list[dict[str, str]]:
    with SAMPLE.open(encoding="utf-8") as rows:
        return [json.loads(row) for row in rows]


def _sample_prose() -> str:
    return "\n\n".join(row["response"] for row in _sample_rows())


def _json_answer() -> str:
    answer = {
        "reasoning": {
            "content_analysis": "The response describes the restaurant's hours and parking.",
            "reference_comparison": "Hours match; the reference lists no valet parking.",
            "hallucination_identification": "Valet parking is not in the reference.",
            "span_extraction": "The span names the valet service.",
            "final_verdict": "One unsupported claim.",
        },
        "hallucination_list": ["offers valet parking", "open until midnight"],
    }
    return json.dumps(answer, indent=2) + "\n"


def _with_secrets(unit: str) -> str:
    lines = (
        f" See https://api.example.com/v1?api_key={SECRET}&page=2 for details.\n"
        f"X-Api-Key: {SECRET}\nAuthorization: Bearer {SECRET}\nkey {SECRET}\n"
    )
    return unit + lines


def _cycled(unit: str) -> Callable[[int], str]:
    return lambda n: (unit * (n // len(unit) + 1))[:n]


def shapes() -> dict[str, Callable[[int], str]]:
    prose = _sample_prose()
    return {
        "prose": _cycled(prose),
        "prose+secrets": _cycled(_with_secrets(prose[:10_000])),
        "json answer": _cycled(_json_answer()),
        "letters": _cycled("a"),
        "x-x-x-": _cycled("x-"),
        "x-keykey": lambda n: "x-" + _cycled("key")(n - 2),
        "sk-sk-sk-": _cycled("sk-"),
        "a=a=a in a query": lambda n: "https://h/?" + _cycled("a=")(n - 11),
        "URL without =": lambda n: "https://h/" + _cycled("a/")(n - 10),
        "quotes": _cycled('"'),
        "Basic Basic": _cycled("Basic "),
        "spaces": _cycled(" "),
        "sentence ends": _cycled(".\n"),
        "AKIA between ends": _cycled("AKIA.\n"),
    }


def beyond_the_target() -> dict[str, Callable[[int], str]]:
    """Shapes timed for the record, not held to the target. With no ".\n" to cut at, a text
    with secrets takes the whole-text path (every pass over all of it); with a key prefix or
    a cookie every few characters, a pass tries a match at each, on either path."""
    unit = _with_secrets(_sample_prose()[:10_000]).replace(".\n", ". \n")
    return {
        "prose+secrets no .\\n": _cycled(unit),
        "sk-1 sk-1 sk-1": _cycled("sk-1 "),
        "cookie.\\n cookie.\\n": _cycled("cookie.\n"),
    }


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``repeats`` runs: the one least disturbed by other processes."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def span_judge() -> tuple[LLMJudge, Item]:
    """A span judge built the production way (no call is made) and the sample's first item."""
    spec = JudgeSpec(
        id="bench",
        provider="openai",
        model="bench-model",
        prompt="data2txt_spans",
        base_url="http://127.0.0.1:9/v1",
    )
    judge = build_judge(spec)
    assert isinstance(judge, LLMJudge)
    row = _sample_rows()[0]
    return judge, Item(row["id"], {"reference": row["reference"], "response": row["response"]})


def answers_at_the_limit(article: str) -> dict[str, str]:
    """Answers of MAX_ANSWER_CHARS characters that the answer path parses and anchors."""
    limit = MAX_ANSWER_CHARS

    def spans(listed: list[str]) -> str:
        head, tail = '{"reasoning": "r", "hallucination_list": [', "]}"
        body, size = [], len(head) + len(tail)
        for entry in listed:
            quoted = json.dumps(entry)
            if size + len(quoted) + 1 > limit:
                break
            body.append(quoted)
            size += len(quoted) + 1
        return head + ",".join(body) + tail

    words = article.split()
    near_miss = " ".join(words[2:6]).upper() + "."
    fuzzy = " ".join(words[2:7]).replace("e", "a", 1)
    return {
        "one word listed again and again": spans([words[1]] * limit),
        "a near miss listed again and again": spans([near_miss] * limit),
        "distinct near misses": spans([f"{fuzzy} {i}" for i in range(limit)]),
        "broken objects, then the answer": '{"a' * ((limit - 40) // 3)
        + '{"hallucination_list": []}',
        "nested braces": '{"a": ' * (limit // 6),
        "unclosed fence, spaces": "```" + " " * (limit - 40) + '{"hallucination_list": []}',
        "letters": "a" * limit,
    }


def answer_path_rows(sizes: list[int], repeats: int) -> None:
    judge, item = span_judge()

    def path(answer: str) -> None:
        judge._judgment(item, ModelResponse(answer), 1, _CallTimer(), {})

    print(f"answer path (LLMJudge._judgment), best of {repeats} runs")
    over = [size for size in sizes if size > MAX_ANSWER_CHARS]
    seconds = []
    for size in over:
        answer = shapes()["prose+secrets"](size)
        seconds.append(best_seconds(lambda answer=answer: path(answer), repeats))
    if over:
        print(row("", [f"{size:,}" for size in over]))
        cells = [f"{s:.3f}s" for s in seconds]
        print(row("over the limit", cells, "   (prose+secrets: 2 x limit redacted, cut)"))
    print(f"at the limit ({MAX_ANSWER_CHARS:,} characters): redacted, parsed, anchored")
    for name, answer in answers_at_the_limit(item.text("response")).items():
        took = best_seconds(lambda answer=answer: path(answer), repeats)
        print(f"  {name:36} {len(answer):>9,} characters {took:8.3f}s", flush=True)


def growth(seconds: list[float], sizes: list[int]) -> float:
    """Time per character at the last size over time per character at the first."""
    if not seconds[0]:
        return float("nan")
    return (seconds[-1] / sizes[-1]) / (seconds[0] / sizes[0])


def row(name: str, cells: list[str], last: str = "") -> str:
    return f"{name:20}" + "".join(f"{cell:>14}" for cell in cells) + last


def redaction_row(
    name: str, make: Callable[[int], str], sizes: list[int], repeats: int
) -> list[float]:
    """Prints and returns the best time of redact_text on ``make(size)`` for each size."""
    seconds = []
    for size in sizes:
        text = make(size)
        seconds.append(best_seconds(lambda text=text: redact_text(text), repeats))
        del text
    cells = [f"{s:.3f}s" for s in seconds]
    print(row(name, cells, f"   {growth(seconds, sizes):.2f}"), flush=True)
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000,30000000")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"redact_text, best of {args.repeats} runs, seconds by size in characters")
    print(row("shape", [f"{size:,}" for size in sizes], "   growth (s/char, last / first)"))
    slowest: dict[int, float] = {}
    for name, make in shapes().items():
        seconds = redaction_row(name, make, sizes, args.repeats)
        for size, took in zip(sizes, seconds, strict=True):
            slowest[size] = max(slowest.get(size, 0.0), took)
    if TARGET_SIZE in slowest:
        verdict = "met" if slowest[TARGET_SIZE] < TARGET_SECONDS else "MISSED"
        print(
            f"slowest shape at {TARGET_SIZE:,} characters: {slowest[TARGET_SIZE]:.3f} s "
            f"(target < {TARGET_SECONDS:g} s: {verdict})"
        )
    print("beyond the target:")
    for name, make in beyond_the_target().items():
        redaction_row(name, make, sizes, args.repeats)
    answer_path_rows(sizes, args.repeats)


if __name__ == "__main__":
    main()
