"""`juryflow stub-server`: the stand-in server on the command line, for tests, benchmarks and
the README's examples that need no key."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console

from juryflow.cli.runs import fail

console = Console()


class Dialect(StrEnum):
    """The chat completions dialects the stand-in speaks (juryflow.standin.dialects)."""

    openai = "openai"
    ollama = "ollama"
    vllm = "vllm"
    llamacpp = "llamacpp"


def stub_server(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on 127.0.0.1.")] = 8765,
    latency_ms: Annotated[
        float, typer.Option(min=0.0, max=3_600_000.0, help="Added latency per request.")
    ] = 0.0,
    fault_429: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of 429 answers.")] = 0.0,
    fault_500: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of 500 answers.")] = 0.0,
    fault_hang: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of requests that hang.")
    ] = 0.0,
    fault_drop: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of dropped connections.")
    ] = 0.0,
    malformed: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of malformed outputs.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    gold: Annotated[
        str | None,
        typer.Option(
            "--gold",
            metavar="DATASET",
            help="Labelled dataset (JSONL, CSV or Parquet with response and labels) whose "
            "gold labels drive the simulated stub-sim-spans-... / stub-sim-score-... judges.",
        ),
    ] = None,
    rpm_limit: Annotated[
        float | None,
        typer.Option(min=0.001, help="Requests per model per --rate-window; 429 beyond it."),
    ] = None,
    tpm_limit: Annotated[
        float | None,
        typer.Option(min=0.001, help="Tokens per model per --rate-window; 429 beyond it."),
    ] = None,
    rate_window: Annotated[
        float, typer.Option(min=0.001, help="Seconds in which a spent budget refills.")
    ] = 60.0,
    dialect: Annotated[
        Dialect,
        typer.Option(
            help="Speak a local server's chat completions: ollama, vllm or llamacpp (tools "
            "refused with its error, JSON as text, no batch API)."
        ),
    ] = Dialect.openai,
) -> None:
    """Serve the Anthropic and OpenAI wire formats locally, for tests and benchmarks.

    With --rpm-limit or --tpm-limit, every answer carries the API's rate-limit headers."""
    from juryflow.standin.server import StubConfig, load_gold, serve

    if fault_429 + fault_500 + fault_hang + fault_drop + malformed > 1:
        fail("--fault-429, --fault-500, --fault-hang, --fault-drop and --malformed are shares "
              "of the requests: together they can be at most 1")  # fmt: skip
    try:
        labels = load_gold(gold) if gold else None
    except ValueError as error:  # DatasetError: missing file, unknown format, no labels
        fail(str(error))
        return
    config = StubConfig(
        latency_ms=latency_ms,
        fault_429=fault_429,
        fault_500=fault_500,
        fault_hang=fault_hang,
        fault_drop=fault_drop,
        malformed=malformed,
        seed=seed,
        gold=labels,
        rpm_limit=rpm_limit,
        tpm_limit=tpm_limit,
        rate_window=rate_window,
        dialect=dialect.value,
    )
    if labels is not None:
        console.print(f"simulated judges know the gold labels of {len(labels)} responses")
    try:  # serve() says where it listens once it does: a taken port prints only the error
        serve(host="127.0.0.1", port=port, config=config)
    except OSError as error:  # the port is taken, or below 1024 without the right
        fail(
            f"cannot serve on 127.0.0.1:{port}: {error.strerror or error}; pass --port a free port"
        )


def register(app: typer.Typer) -> None:
    """Add `stub-server` to the juryflow command line."""
    app.command("stub-server")(stub_server)
