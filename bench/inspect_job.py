"""The Inspect AI side of ``bench_vs_inspect.py``: the same rendered prompts, one model call each.

Runs in Inspect's own virtualenv (``.venv-inspect``), never in juryflow's: it imports only
``inspect_ai``. ``bench_vs_inspect.py`` writes the dataset (``input`` = the prompt juryflow
renders for the item, ``id`` = the item id) and starts::

    .venv-inspect/bin/python bench/inspect_job.py PROMPTS.jsonl --log-dir DIR \\
        --max-connections 64

with ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` pointing at the stand-in. It is one
``eval()`` of one task (solver ``generate()``, no scorer: juryflow's span matching has no
Inspect twin) over three models, as ``inspect eval --model a,b,c`` would run it, except that
the OpenAI models are built with ``responses_api=False``: Inspect 0.3.285 sends unknown
OpenAI model names to the Responses API, which the stand-in (like most OpenAI-compatible
servers) does not serve, while juryflow uses Chat Completions. ``max_tokens`` 2048 is
juryflow's default; it also keeps Inspect's Anthropic client off streaming. Retries,
``max_samples`` and ``max_tasks`` are Inspect's defaults. Exits 1 unless every log succeeded.
"""

from __future__ import annotations

import argparse
import sys

from inspect_ai import Task, eval
from inspect_ai.dataset import json_dataset
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.solver import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--max-connections", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=2048)
    args = parser.parse_args()
    config = GenerateConfig(max_connections=args.max_connections, max_tokens=args.max_tokens)
    models = [
        get_model("anthropic/stub-spans-good", config=config),
        get_model("openai/stub-spans-nearmiss", config=config, responses_api=False),
        get_model("openai/stub-random", config=config, responses_api=False),
    ]
    task = Task(dataset=json_dataset(args.dataset), solver=generate())
    logs = eval(task, model=models, log_dir=args.log_dir, display="none")
    failed = [
        f"{log.eval.model}: {log.status} {log.error}" for log in logs if log.status != "success"
    ]
    if failed or len(logs) != len(models):
        sys.exit(f"Inspect eval did not succeed: {failed or len(logs)}")


if __name__ == "__main__":
    main()
