"""A local stand-in for the Anthropic and OpenAI APIs, for tests, benches and demos.

It speaks the real wire formats, so the official SDK clients run unchanged against it:

- ``POST /v1/messages`` (Anthropic Messages: text or ``tool_use`` blocks, ``usage``);
- ``POST /v1/chat/completions`` (OpenAI Chat Completions: ``content``, ``tool_calls``,
  ``response_format`` JSON-schema answers, ``usage``);
- ``GET /_stats`` (request counts as JSON) and ``POST /_reset`` (zero them).

Point an Anthropic client at ``http://HOST:PORT`` and an OpenAI client at
``http://HOST:PORT/v1`` (:class:`StubHandle` has both).

Model-name conventions
----------------------
The model name scripts the answer: ``stub-<answer>[+<option>]...``.

Answers (JSON of the shape the seed prompts ask for; spans are cut from the prompt's
"Generated Article" section, so they are real substrings or deliberate near-misses):

=====================  ==========================================================
``score-<x>``          ``{"score": x, "reasoning": ...}``
``spans-good``         up to two exact substrings of the article
``spans-none``         an empty ``hallucination_list``
``spans-normalized``   a substring re-cased with a trailing period (normalized match)
``spans-fuzzy``        a 5-word substring with one letter changed (fuzzy match)
``spans-nearmiss``     one normalized and one fuzzy span
``spans-repeat``       a word that occurs at least twice in the article, listed twice
``spans-invented``     a span that is not in the article (unmatched)
``broken``             truncated JSON, always as text
``prose``              a sentence with no JSON, always as text
``random``             a seeded-random valid answer of the prompt's kind
``long-<n>``           a valid ``score`` answer whose reasoning is n characters long
``sim-spans-<params>`` a simulated span judge of known recall and false-span share
``sim-score-<params>`` a simulated score judge of known sensitivity and specificity
``sim-pair-<params>``  a simulated pairwise judge of known accuracy and position bias
=====================  ==========================================================

Simulated judges answer from the gold labels of a dataset (``StubConfig.gold``, loaded by
:func:`load_gold`; ``--gold DATASET`` on the command line): ``stub-sim-spans-r0.8-f0.1``
returns each gold span with chance 0.8 plus false spans making up about 10% of what it
returns; ``stub-sim-score-s0.9-p0.8-m1`` scores 90% of hallucinated responses above 0.0 and
80% of clean ones 0.0, putting single mild hallucinations at 0.3. All parameters (recall,
false share, boundary jitter, near misses, over-flagging, broken output, sensitivity,
specificity, mild) are in
:mod:`juryflow.standin.simulator`. Answers are seeded by (seed, model name,
response), so they are the same across runs and concurrency and independent across judges;
a response not in the gold set (or no gold set) gets the ``random`` answer.

Sampling: a request whose body has ``temperature`` above 0 is seeded also by its draw, the
number of identical (model, prompt) sampled requests this server process answered before it
(:class:`SampleDraws`); draw 0 is seeded exactly as a temperature-0 request, so N samples of
one item get N independent answers of the same judge and the first equals the unsampled one.

Any model not starting with ``stub-`` gets ``StubConfig.default_answer`` (``random``),
so a real panel file works against the stand-in unchanged.

Options, applied in order:

- ``fenced``: answer as text wrapped in a json code fence, ignoring structured output;
- ``prefixed``: answer as text, a sentence then the JSON, ignoring structured output;
- ``text``: answer as plain-text JSON, ignoring tools / ``response_format``;
- ``tool``: (OpenAI) answer through a ``tool_calls`` entry even when not asked to;
- ``ms<N>``: this model's answers take N ms (instead of ``latency_ms``);
- faults ``429``, ``500``, ``hang``, ``drop``, ``400``, ``401``, ``403``, ``404``,
  optionally ``x<N>``: the
  first N requests for this model name get that fault (without a count: every request).
  Faults queue in order: ``stub-score-0.6+429x2+500x1`` answers 429, 429, 500, then 0.6.

Fault meanings: ``429`` a rate limit with ``Retry-After`` (``StubConfig.retry_after``
seconds); ``500`` an internal error; ``hang`` no answer until the client gives up (or
``hang_seconds``); ``drop`` the socket is closed without a response; ``400`` an invalid
request; ``401`` an authentication error whose message quotes the key it got, as some real
servers do, so tests can check keys never leak into records; ``403`` a permission error;
``404`` an unknown model (fail-fast tests); ``echo`` a 400 whose message
quotes the request target and every request header, as debugging proxies do.

Structured answers: when the request carries tools (Anthropic forced ``tool_choice`` or
OpenAI ``tools``) the answer is a tool call; an OpenAI ``response_format`` gets the JSON as
``content``; otherwise the JSON is the text (pretty-printed, as models write it).

Faults by rate (``fault_429`` ... ``fault_drop``, probabilities per request, from a
server-wide RNG seeded with ``seed``) apply to requests the name or script did not fault.
``StubConfig.script`` (or :meth:`StubHandle.enqueue`) queues steps per model name that run
before the name's rule: a fault (``"429"``, ``"drop"``, ...), an answer (``"score-0.3"``,
``"spans-good"``, ...) or ``"raw:<text>"`` for literal output text. Two steps misbehave as a
broken or hostile server would: ``"usage:<JSON>"`` answers as the name's rule does but with
that JSON as the answer's ``usage`` (negative counts, say), and ``"body:<text>"`` answers
200 with that text, as it is, for the whole body.

Rate limits (``rpm_limit``, ``tpm_limit`` per ``rate_window`` seconds; ``--rpm-limit``...):
a real budget per model, enforced with 429s and reported on every model answer in the
API's own rate-limit headers (see :mod:`juryflow.standin.quotas`).

Prompt caches (:class:`PromptCache`, one per server): as the APIs do, the prefix up to an
Anthropic ``cache_control`` block (from the model's minimum size) and the longest prefix
of an OpenAI prompt seen before (from 1,024 tokens, in steps of 128) are written by the
first call and read by later ones for 5 minutes after their last use; ``usage`` reports
``cache_creation_input_tokens`` / ``cache_read_input_tokens`` (Anthropic, whose
``input_tokens`` then leave them out) and ``prompt_tokens_details.cached_tokens`` (OpenAI).

Local servers (``dialect``, ``--dialect ollama|vllm|llamacpp``): the chat completions route
answers as Ollama, vLLM or the llama.cpp server does: ``tools`` refused with that server's
error, JSON as text in the forms small models write it, no cached-token count, no batch API
(see :mod:`juryflow.standin.dialects`).

Run it: ``python -m juryflow.standin.server --port 8765 --latency-ms 200 --fault-429 0.1``
(add ``--gold data.jsonl`` for the ``sim-*`` judges, ``--dialect ollama --port 11434`` to
stand in for a local Ollama).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from juryflow.judges.untrusted.loading import NestingError, load_json
from juryflow.standin import batches
from juryflow.standin.dialects import DIALECTS, local_dialect
from juryflow.standin.http_wire import Request, error_body, read_request, send
from juryflow.standin.model import (
    BODY_STEP,
    FAULTS,
    USAGE_STEP,
    SampleDraws,
    StubConfig,
    StubStats,
    answer_seed,
    anthropic_message,
    make_answer,
    openai_completion,
    parse_model,
    prompt_of,
    request_kind,
    sampled,
)
from juryflow.standin.quotas import QuotaKeeper
from juryflow.standin.simulator import Gold, load_gold

__all__ = [
    "StubConfig",
    "StubHandle",
    "StubServer",
    "StubStats",
    "load_gold",
    "main",
    "parse_model",
    "prompt_of",
    "running_stub_server",
    "serve",
]
"""The stand-in as tests, benches and the command line use it; what it answers is in
:mod:`juryflow.standin.model`, its HTTP in :mod:`juryflow.standin.http_wire`."""

_MAX_REQUESTS_PER_CONNECTION = 100_000


# --- the server ----------------------------------------------------------------------------


@dataclass
class _Reply:
    """What to do with a model call: an HTTP answer, or (status None) nothing more to send."""

    outcome: str
    status: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] | None = None
    body: bytes | None = None
    """Sent as it is instead of ``payload`` (a ``body:`` step)."""


class StubServer:
    """The asyncio server; one instance per running stand-in."""

    def __init__(self, config: StubConfig | None = None, stats: StubStats | None = None) -> None:
        self.config = config or StubConfig()
        self.stats = stats or StubStats()
        self._rng = random.Random(self.config.seed)
        self._script_lock = threading.Lock()
        self._script: dict[str, deque[str]] = {
            model: deque(steps) for model, steps in self.config.script.items()
        }
        self._ids = itertools.count(1)
        cfg = self.config
        self.quotas = QuotaKeeper(cfg.rpm_limit, cfg.tpm_limit, cfg.rate_window)
        self.dialect = local_dialect(cfg.dialect)
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._server: asyncio.Server | None = None
        self._draws = SampleDraws()

    def enqueue(self, model: str, *steps: str) -> None:
        with self._script_lock:
            self._script.setdefault(model, deque()).extend(steps)

    def next_step(self, model: str) -> str | None:
        with self._script_lock:
            queue = self._script.get(model)
            return queue.popleft() if queue else None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._connection, host, port, backlog=1024)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Abort sockets rather than cancel tasks: each handler then ends on its own read
        # error, and Python 3.11's stream callback does not log a cancelled handler.
        for writer in list(self._connections.values()):
            writer.transport.abort()
        tasks = list(self._connections)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=2)
            for task in pending:
                task.cancel()
        if self._server is not None:
            await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            for _ in range(_MAX_REQUESTS_PER_CONNECTION):
                request = await read_request(reader)
                if request is None:
                    break
                keep_open = await self._dispatch(request, reader, writer)
                if not keep_open or request.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._connections.pop(task, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _dispatch(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        path = request.path.split("?", 1)[0]
        if not path.startswith("/_"):
            self.stats._request(request.method, request.path, request.headers, request.body)
        if request.method == "GET" and path == "/_stats":
            stats = {**self.stats.snapshot(), "batches": batches.stats_of(self).snapshot()}
            return await send(writer, 200, stats)
        if request.method == "POST" and path == "/_reset":
            self.stats.reset()
            batches.stats_of(self).reset()
            return await send(writer, 200, {"ok": True})
        if batches.is_batch_route(path):
            return await batches.handle(self, request, writer)
        if path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith("/chat/completions"):
            api = "openai"
        else:
            return await send(writer, 404, {"error": {"message": f"no route {path}"}})
        if request.method != "POST":
            return await send(writer, 405, error_body(api, 400, "use POST"))
        try:
            body = load_json(request.body or b"{}")
        except NestingError as error:
            return await send(writer, 400, error_body(api, 400, f"body is {error}"))
        except ValueError:
            return await send(writer, 400, error_body(api, 400, "body is not JSON"))
        if api == "anthropic" and request.headers.get("anthropic-version", "") >= "2026-10-21":
            # Like the real API at this version: sampling parameters are refused.
            sampling = [p for p in ("temperature", "top_p", "top_k") if p in body]
            if sampling:
                message = f"{sampling[0]}: Extra inputs are not permitted"
                return await send(writer, 400, error_body(api, 400, message))
        model = str(body.get("model", ""))
        number = self.stats._start(path, model)
        try:
            reply = await self._model_call(api, body, model, number, request, reader, writer)
        except BaseException:
            self.stats._finish("error")
            raise
        # Counted before the client can see the answer, so a caller that reads the stats
        # right after its response never races the bookkeeping.
        self.stats._finish(reply.outcome)
        if reply.status is None:
            return False
        content = reply.body if reply.body is not None else reply.payload
        return await send(writer, reply.status, content, reply.headers)

    async def _model_call(
        self,
        api: str,
        body: dict[str, Any],
        model: str,
        number: int,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> _Reply:
        # Counted on arrival, as the APIs do; the headers say what was left then.
        prompt = prompt_of(body) if self.config.tpm_limit is not None else ""
        admission = self.quotas.admit(api, model, body, prompt)
        if admission.refused:
            message = "stub: rate limit exceeded for this model; wait for retry-after"
            return _Reply("429", 429, error_body(api, 429, message), admission.headers)
        reply = await self._answer(api, body, model, number, request, reader, writer)
        if admission.headers and reply.status is not None:
            reply.headers = {**admission.headers, **(reply.headers or {})}
        return reply

    async def _answer(
        self,
        api: str,
        body: dict[str, Any],
        model: str,
        number: int,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> _Reply:
        config = self.config
        try:
            rule = parse_model(model, config.default_answer)
        except ValueError as error:
            return _Reply("400", 400, error_body(api, 400, str(error)))
        if api == "openai" and self.dialect is not None and self.dialect.refuses(body):
            # Checked before any model work, as the servers validate a request first.
            status, payload = self.dialect.refusal(model)
            return _Reply(str(status), status, payload)
        step = self.next_step(model)
        if step is not None and step.startswith(BODY_STEP):
            return _Reply("ok", 200, body=step[len(BODY_STEP) :].encode("utf-8"))
        usage: Any = None
        if step is not None and step.startswith(USAGE_STEP):
            usage = json.loads(step[len(USAGE_STEP) :])
            step = None  # the name's rule answers; only its usage is replaced
        fault: str | None
        if step is not None:
            fault = step if step in FAULTS else None
        else:
            # ``number`` counts this model's requests since start (or the last stats reset).
            fault = rule.fault_for(number - 1) or self.random_fault()

        if fault == "drop":
            writer.transport.abort()
            return _Reply("drop")
        if fault == "hang":
            # Hold the request without answering until the client gives up (closes).
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                await asyncio.wait_for(reader.read(1), config.hang_seconds)
            writer.transport.abort()
            return _Reply("hang")

        latency = rule.latency_ms if rule.latency_ms is not None else config.latency_ms
        latency += self._rng.uniform(0, config.latency_jitter_ms) if config.latency_jitter_ms else 0
        if latency > 0:
            await asyncio.sleep(latency / 1000.0)

        if fault == "429":
            headers = {"retry-after": _seconds(config.retry_after)}
            return _Reply("429", 429, error_body(api, 429, "stub: rate limited"), headers)
        if fault == "500":
            return _Reply("500", 500, error_body(api, 500, "stub: internal error"))
        if fault == "400":
            return _Reply("400", 400, error_body(api, 400, "stub: invalid request"))
        if fault == "401":
            key = request.headers.get("x-api-key") or request.headers.get("authorization", "")
            key = key.removeprefix("Bearer ").strip()
            message = f"stub: Incorrect API key provided: {key}"
            return _Reply("401", 401, error_body(api, 401, message))
        if fault == "403":
            message = "stub: this key may not use this model"
            return _Reply("403", 403, error_body(api, 403, message))
        if fault == "404":
            message = f"stub: the model {model!r} does not exist or you do not have access to it"
            return _Reply("404", 404, error_body(api, 404, message))
        if fault == "echo":
            echoed = "; ".join(f"{name}: {value}" for name, value in request.headers.items())
            message = f"stub: cannot route POST {request.path} with headers {echoed}"
            return _Reply("echo", 400, error_body(api, 400, message))

        prompt = prompt_of(body)
        self.stats._prompt(prompt)
        kind = request_kind(body, prompt)
        # Answers are seeded by the prompt, not by arrival order: concurrent runs agree (a
        # sampled request's draw counts identical ones, so its samples differ, see answer_seed).
        draw = self.draw_for(body, model, prompt)
        seed = answer_seed(config.seed, model, prompt, draw)
        rng = random.Random(seed)
        if fault == "malformed":
            step = "broken"
        try:
            answer = make_answer(
                step or rule.answer, kind, prompt, rng, config.gold, config.seed, model, draw
            )
        except ValueError as error:
            return _Reply("400", 400, error_body(api, 400, str(error)))
        if api == "anthropic":
            payload = anthropic_message(body, answer, rule, prompt, number)
        else:
            payload = openai_completion(
                body, answer, rule, prompt, number, dialect=self.dialect, seed=seed
            )
        if usage is not None:
            payload["usage"] = usage
        return _Reply("ok", 200, payload)

    def draw_for(self, body: dict[str, Any], model: str, prompt: str) -> int:
        """Which draw of (``model``, ``prompt``) this answer is: 0 at temperature 0 (or none
        sent), else how many sampled requests identical to it were answered before."""
        return self._draws.next(model, prompt) if sampled(body) else 0

    def random_fault(self) -> str | None:
        config = self.config
        draw = self._rng.random()
        for fault, rate in (
            ("429", config.fault_429),
            ("500", config.fault_500),
            ("hang", config.fault_hang),
            ("drop", config.fault_drop),
            ("malformed", config.malformed),
        ):
            if draw < rate:
                return fault
            draw -= rate
        return None


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# --- running it ----------------------------------------------------------------------------


@dataclass
class StubHandle:
    base_url: str
    """``http://127.0.0.1:PORT``: the Anthropic base URL."""
    stats: StubStats
    server: StubServer

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    def enqueue(self, model: str, *steps: str) -> None:
        """Queue scripted steps (faults, answers, ``raw:`` text) for ``model``'s next requests."""
        self.server.enqueue(model, *steps)

    def prompts(self) -> list[str]:
        """The prompts of the latest answered model calls (up to PROMPT_LOG_SIZE)."""
        return self.stats.prompts()


@contextlib.contextmanager
def running_stub_server(
    config: StubConfig | None = None, host: str = "127.0.0.1", port: int = 0
) -> Iterator[StubHandle]:
    """Run the stand-in on a background thread (a free port by default) for a block."""
    server = StubServer(config)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    bound: list[int] = []
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            bound.append(loop.run_until_complete(server.start(host, port)))
        except BaseException as error:
            failure.append(error)
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.close())
        loop.close()

    thread = threading.Thread(target=run, name="juryflow-stub-server", daemon=True)
    thread.start()
    if not ready.wait(10) or failure:
        raise RuntimeError(f"stub server did not start: {failure[0] if failure else 'timeout'}")
    try:
        yield StubHandle(f"http://{host}:{bound[0]}", server.stats, server)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def serve(host: str = "127.0.0.1", port: int = 8765, config: StubConfig | None = None) -> None:
    """Run the stand-in in the foreground until interrupted."""
    server = StubServer(config)

    async def main() -> None:
        bound = await server.start(host, port)
        dialect = server.config.dialect
        speaks = "" if dialect == "openai" else f", chat completions as {dialect} answers them"
        print(
            f"juryflow stub server on http://{host}:{bound} "
            f"(Anthropic base URL http://{host}:{bound}, OpenAI http://{host}:{bound}/v1{speaks}); "
            "Ctrl-C stops it",
            flush=True,
        )
        try:
            await asyncio.Event().wait()
        finally:
            await server.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m juryflow.standin.server",
        description="Local stand-in for the Anthropic and OpenAI APIs (see module docs).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--latency-jitter-ms", type=float, default=0.0)
    parser.add_argument("--fault-429", type=float, default=0.0, help="rate of 429 answers")
    parser.add_argument("--fault-500", type=float, default=0.0, help="rate of 500 answers")
    parser.add_argument("--fault-hang", type=float, default=0.0, help="rate of hung requests")
    parser.add_argument("--fault-drop", type=float, default=0.0, help="rate of dropped sockets")
    parser.add_argument("--malformed", type=float, default=0.0, help="rate of broken JSON")
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds")
    parser.add_argument("--hang-seconds", type=float, default=30.0)
    parser.add_argument("--rpm-limit", type=float, default=None, help="requests per window")
    parser.add_argument("--tpm-limit", type=float, default=None, help="tokens per window")
    parser.add_argument("--rate-window", type=float, default=60.0, help="rate window, seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dialect",
        choices=DIALECTS,
        default="openai",
        help="speak a local server's chat completions (no tools, JSON as text, no batch API)",
    )
    parser.add_argument(
        "--gold", default=None, help="dataset whose labels drive the sim-* judges (JSONL, ...)"
    )
    # The batch APIs (see juryflow.standin.batches): how a batch moves on, and its limits.
    batch = parser.add_argument_group("batches")
    batch.add_argument("--no-batch-api", action="store_true", help="batch routes answer 404")
    batch.add_argument("--batch-polls-to-finish", type=int, default=3, metavar="N")
    batch.add_argument("--batch-seconds-to-finish", type=float, default=None, metavar="S")
    batch.add_argument("--batch-never-finishes", action="store_true")
    batch.add_argument("--batch-polls-to-expire", type=int, default=None, metavar="N")
    batch.add_argument("--batch-max-requests", type=int, default=None, metavar="N")
    batch.add_argument("--batch-max-bytes", type=int, default=None, metavar="BYTES")
    args = parser.parse_args(argv)
    try:
        gold = load_gold(args.gold) if args.gold else None
    except ValueError as error:  # DatasetError: the file cannot be read as a labelled set
        parser.error(str(error))
    try:
        config = _config_from(args, gold)
    except ValueError as error:  # a limit or a rate out of range: the message names it
        parser.error(str(error))
    if args.batch_polls_to_finish < 1:
        parser.error("--batch-polls-to-finish: give 1 or more polls")
    config.batch_api = not args.no_batch_api
    config.batch_polls_to_finish = args.batch_polls_to_finish
    config.batch_seconds_to_finish = args.batch_seconds_to_finish
    config.batch_never_finishes = args.batch_never_finishes
    config.batch_polls_to_expire = args.batch_polls_to_expire
    config.batch_max_requests = args.batch_max_requests
    config.batch_max_bytes = args.batch_max_bytes
    try:
        serve(args.host, args.port, config)
    except OSError as error:  # the port is taken (a real server on it?), or not ours to bind
        parser.exit(
            1, f"cannot serve on {args.host}:{args.port}: {error}; pass --port a free port\n"
        )


def _config_from(args: argparse.Namespace, gold: Gold | None) -> StubConfig:
    return StubConfig(
        latency_ms=args.latency_ms,
        latency_jitter_ms=args.latency_jitter_ms,
        fault_429=args.fault_429,
        fault_500=args.fault_500,
        fault_hang=args.fault_hang,
        fault_drop=args.fault_drop,
        malformed=args.malformed,
        retry_after=args.retry_after,
        hang_seconds=args.hang_seconds,
        seed=args.seed,
        gold=gold,
        rpm_limit=args.rpm_limit,
        tpm_limit=args.tpm_limit,
        rate_window=args.rate_window,
        dialect=args.dialect,
    )


if __name__ == "__main__":
    main()
