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
import hashlib
import itertools
import json
import random
import re
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from juryflow.judges.pricing import (
    OPENAI_CACHE_INCREMENT,
    OPENAI_CACHE_MIN_TOKENS,
    anthropic_cache_minimum,
)
from juryflow.judges.providers.base import TOOL_NAME
from juryflow.judges.untrusted.loading import NestingError, load_json
from juryflow.standin.dialects import DIALECTS, LocalDialect, local_dialect, text_form, written
from juryflow.standin.quotas import QuotaKeeper
from juryflow.standin.simulator import Gold, load_gold, sim_answer

Fault = Literal["429", "500", "hang", "drop", "400", "401", "403", "404", "echo"]
FAULTS: tuple[str, ...] = ("429", "500", "hang", "drop", "400", "401", "403", "404", "echo")
USAGE_STEP = "usage:"
"""A scripted step: the rule's answer with the JSON after it as its ``usage``."""
BODY_STEP = "body:"
"""A scripted step: a 200 whose whole body is the text after it."""

# The article ends where the seed prompt's instructions resume, or (instructions first,
# data2txt_spans@v2) at the end of the prompt.
_ARTICLE = re.compile(
    r"\*\*Generated Article:\*\*\n(.*?)(?:\n\n## Output Format Requirements|\n?\Z)", re.DOTALL
)
_REASONING_STEPS = (
    "content_analysis",
    "reference_comparison",
    "hallucination_identification",
    "span_extraction",
    "final_verdict",
)
_MAX_REQUESTS_PER_CONNECTION = 100_000
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


@dataclass
class StubConfig:
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0
    """Extra uniform-random latency, 0..jitter ms, per answer."""
    fault_429: float = 0.0
    fault_500: float = 0.0
    fault_hang: float = 0.0
    fault_drop: float = 0.0
    malformed: float = 0.0
    """Share of successful answers replaced by broken JSON (a model's malformed output)."""
    retry_after: float = 1.0
    """Seconds sent in Retry-After with a 429."""
    hang_seconds: float = 30.0
    """How long a hung request is held if the client never gives up."""
    seed: int = 0
    default_answer: str = "random"
    """The answer of a model whose name does not start with ``stub-``."""
    script: dict[str, list[str]] = field(default_factory=dict)
    gold: Gold | None = None
    """Gold labels by response text, for the ``sim-*`` judges (see :func:`load_gold`)."""
    rpm_limit: float | None = None
    """Requests each model may take per ``rate_window``; beyond it a 429 with retry-after.
    Set (or ``tpm_limit``), every model answer carries the API's rate-limit headers."""
    tpm_limit: float | None = None
    """Tokens each model may take per ``rate_window`` (prompt/4 plus ``max_tokens``)."""
    rate_window: float = 60.0
    """Seconds in which a spent budget refills whole (see :mod:`juryflow.standin.quotas`)."""
    batch_api: bool = True
    """Whether the batch routes exist; without them they answer 404, as vLLM or Ollama do."""
    batch_polls_to_finish: int = 3
    """Polls of a batch until it has ended (see :mod:`juryflow.standin.batches`)."""
    batch_seconds_to_finish: float | None = None
    """When set, a batch ends this many seconds after creation instead, whatever the polls."""
    batch_never_finishes: bool = False
    """Batches stay in progress, processing nothing, until cancelled (or expired)."""
    batch_polls_to_expire: int | None = None
    """At this poll a batch not yet ended expires: its unprocessed requests expire."""
    batch_max_requests: int | None = None
    """Requests per batch; None: the provider's documented limit (50,000 / 100,000)."""
    batch_max_bytes: int | None = None
    """Bytes per input file / batch body; None: the provider's limit (200 MB / 256 MB)."""
    dialect: str = "openai"
    """``openai``, or the local server whose chat completions the stand-in speaks:
    ``ollama``, ``vllm``, ``llamacpp`` (see :mod:`juryflow.standin.dialects`)."""

    def __post_init__(self) -> None:
        local_dialect(self.dialect)  # raises ValueError naming the dialects
        rates = (self.fault_429, self.fault_500, self.fault_hang, self.fault_drop, self.malformed)
        if any(r < 0 for r in rates) or sum(rates) > 1:
            raise ValueError("fault rates must be >= 0 and sum to at most 1")
        limits = (self.rpm_limit, self.tpm_limit)
        if any(limit is not None and limit <= 0 for limit in limits) or self.rate_window <= 0:
            raise ValueError("rate limits and the rate window must be positive")

    @property
    def serves_batches(self) -> bool:
        """Whether the batch routes exist: local servers have none, whatever ``batch_api``."""
        return self.batch_api and self.dialect == "openai"


PROMPT_LOG_SIZE = 256


class StubStats:
    """Request counters, updated by the server thread and read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.total = 0
            self.by_model: Counter[str] = Counter()
            self.by_path: Counter[str] = Counter()
            self.by_outcome: Counter[str] = Counter()
            self.in_flight = 0
            self.max_in_flight = 0
            # The latest prompts answered, so tests can see exactly what a model was sent.
            self.recent_prompts: deque[str] = deque(maxlen=PROMPT_LOG_SIZE)
            # The latest requests as they came over the wire, so tests can see what was sent.
            self.recent_wire: deque[WireRequest] = deque(maxlen=PROMPT_LOG_SIZE)

    def _start(self, path: str, model: str | None) -> int:
        with self._lock:
            self.total += 1
            self.by_path[path] += 1
            if model is not None:
                self.by_model[model] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.by_model[model] if model is not None else self.total

    def _finish(self, outcome: str) -> None:
        with self._lock:
            self.in_flight -= 1
            self.by_outcome[outcome] += 1

    def _prompt(self, prompt: str) -> None:
        with self._lock:
            self.recent_prompts.append(prompt)

    def prompts(self) -> list[str]:
        with self._lock:
            return list(self.recent_prompts)

    def _request(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        with self._lock:
            self.recent_wire.append(WireRequest(method, target, dict(headers), body))

    def wire_requests(self) -> list[WireRequest]:
        """The latest requests as received: method, target, lower-cased headers, body."""
        with self._lock:
            return list(self.recent_wire)

    def requests_seen(self) -> list[tuple[str, dict[str, str]]]:
        """(request target with its query, lower-cased headers) of the latest requests."""
        with self._lock:
            return [(wire.target, wire.headers) for wire in self.recent_wire]

    def requests(self, model: str | None = None) -> int:
        with self._lock:
            return self.total if model is None else self.by_model[model]

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "total": self.total,
                "by_model": dict(self.by_model),
                "by_path": dict(self.by_path),
                "by_outcome": dict(self.by_outcome),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
            }


# --- the model-name rule -------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    answer: str
    faults: tuple[tuple[str, int | None], ...] = ()
    fenced: bool = False
    prefixed: bool = False
    text: bool = False
    tool: bool = False
    latency_ms: float | None = None

    def fault_for(self, index: int) -> str | None:
        """The scripted fault of this model's ``index``-th request (0-based), if any."""
        for fault, count in self.faults:
            if count is None:
                return fault
            if index < count:
                return fault
            index -= count
        return None


def parse_model(model: str, default_answer: str = "random") -> Rule:
    if not model.startswith("stub-"):
        return Rule(answer=default_answer)
    answer, *options = model[len("stub-") :].split("+")
    faults: list[tuple[str, int | None]] = []
    flags: dict[str, Any] = {}
    for option in options:
        name, _, count = option.partition("x")
        if name in FAULTS and (not count or count.isdigit()):
            faults.append((name, int(count) if count else None))
        elif option in ("fenced", "prefixed", "text", "tool"):
            flags[option] = True
        elif option.startswith("ms") and option[2:].replace(".", "", 1).isdigit():
            flags["latency_ms"] = float(option[2:])
        else:
            raise ValueError(f"stub model {model!r}: unknown option {option!r}")
    return Rule(answer=answer or default_answer, faults=tuple(faults), **flags)


# --- answers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What the stand-in model says: a JSON object, or literal text when ``data`` is None."""

    data: dict[str, Any] | None
    text: str


def article_of(prompt: str) -> str:
    match = _ARTICLE.search(prompt)
    return match.group(1) if match else ""


def _words(article: str) -> list[re.Match[str]]:
    return list(re.finditer(r"[^\s]+", article))


def _window(article: str, words: list[re.Match[str]], start: int, length: int) -> str:
    """Words ``start..start+length`` as written (original spacing), minus edge punctuation."""
    if not words:
        return ""
    start = max(0, min(start, len(words) - 1))
    end = min(len(words), start + length)
    text = article[words[start].start() : words[end - 1].end()]
    return text.strip(".,;:!?\"'()[]")


def good_spans(article: str) -> list[str]:
    words = _words(article)
    spans: list[str] = []
    number = next((w.group() for w in words if any(c.isdigit() for c in w.group())), None)
    if number:
        spans.append(number.strip(".,;:!?\"'()[]"))
    phrase = _window(article, words, len(words) // 2, 3)
    if phrase and phrase not in spans:
        spans.append(phrase)
    return [s for s in spans if s and s in article]


def normalized_span(article: str) -> str:
    words = _words(article)
    phrase = _window(article, words, len(words) // 3, 3)
    return phrase.swapcase() + "." if phrase else ""


def fuzzy_span(article: str) -> str:
    words = _words(article)
    phrase = _window(article, words, len(words) // 4, 5)
    letters = [i for i, c in enumerate(phrase) if c.isalpha()]
    if not letters:
        return phrase
    i = letters[len(letters) // 2]
    replacement = "x" if phrase[i].lower() != "x" else "q"
    return phrase[:i] + replacement + phrase[i + 1 :]


def repeated_word(article: str) -> str:
    counts = Counter(w.group().strip(".,;:!?\"'()[]") for w in _words(article))
    repeats = [w for w, n in counts.items() if n >= 2 and len(w) >= 3]
    if repeats:
        return max(repeats, key=len)
    words = _words(article)
    return words[0].group() if words else ""


def _spans_answer(spans: list[str]) -> dict[str, Any]:
    reasoning = {step: f"stub: {step.replace('_', ' ')}" for step in _REASONING_STEPS}
    return {"reasoning": reasoning, "hallucination_list": spans}


def _score_answer(score: float) -> dict[str, Any]:
    return {"score": score, "reasoning": f"stub judge: score {score}"}


def sampled(body: dict[str, Any]) -> bool:
    """Whether a request asks for a sampled answer: a ``temperature`` above 0 in its body."""
    temperature = body.get("temperature")
    return isinstance(temperature, int | float) and temperature > 0


class SampleDraws:
    """How many sampled requests each (model, prompt) has had in this server process.

    Never reset (not by ``/_reset`` either): a run that adds a fourth sample after three
    gets the fourth draw, as a model sampled again gives a new answer.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[bytes] = Counter()

    def next(self, model: str, prompt: str) -> int:
        """The draw of this request, counting it."""
        key = hashlib.sha256(f"{model}\0{prompt}".encode()).digest()
        with self._lock:
            draw = self._counts[key]
            self._counts[key] = draw + 1
        return draw


def answer_seed(seed: int, model: str, prompt: str, draw: int = 0) -> bytes:
    """The digest seeding an answer; draw 0 keeps the digest every answer had before draws
    existed, so temperature-0 answers (and first samples) are byte-identical to them."""
    suffix = f"|draw{draw}" if draw else ""
    return hashlib.sha256(f"{seed}|{model}|{prompt}{suffix}".encode()).digest()


def make_answer(
    answer: str,
    kind: str,
    prompt: str,
    rng: random.Random,
    gold: Gold | None = None,
    seed: int = 0,
    model: str = "",
    draw: int = 0,
) -> Answer:
    if answer.startswith("sim-"):
        return _simulated(answer, kind, prompt, rng, gold, seed, model, draw)
    if answer.startswith("raw:"):
        return Answer(None, answer[len("raw:") :])
    if answer == "broken":
        return Answer(None, '{"score": 0.5, "reasoning": "the output cites a fi')
    if answer == "prose":
        return Answer(None, "I think the response is mostly fine, with one or two issues.")
    if answer == "random":
        return _random_answer(kind, prompt, rng)
    if answer.startswith("long-") and answer[len("long-") :].isdigit():
        return _json_answer(_score_answer(0.0) | {"reasoning": "x" * int(answer[len("long-") :])})
    if answer.startswith("score-"):
        try:
            score = float(answer[len("score-") :])
        except ValueError:
            raise ValueError(f"stub answer {answer!r}: score is not a number") from None
        return _json_answer(_score_answer(score))
    article = article_of(prompt)
    spans: dict[str, list[str]] = {
        "spans-good": good_spans(article),
        "spans-none": [],
        "spans-normalized": [normalized_span(article)],
        "spans-fuzzy": [fuzzy_span(article)],
        "spans-nearmiss": [normalized_span(article), fuzzy_span(article)],
        "spans-repeat": [repeated_word(article)] * 2,
        "spans-invented": ["the moon landing was staged in 1854"],
    }
    if answer not in spans:
        raise ValueError(f"unknown stub answer {answer!r}")
    return _json_answer(_spans_answer([s for s in spans[answer] if s]))


def _simulated(
    answer: str,
    kind: str,
    prompt: str,
    rng: random.Random,
    gold: Gold | None,
    seed: int,
    model: str,
    draw: int = 0,
) -> Answer:
    simulated = sim_answer(answer, prompt, gold, seed, model or answer, draw)
    if simulated is None:
        return _random_answer(kind, prompt, rng)
    if simulated.kind == "broken":
        return make_answer("broken", kind, prompt, rng)
    if simulated.kind == "score":
        return _json_answer(_score_answer(simulated.score))
    return _json_answer(_spans_answer(list(simulated.spans)))


def _random_answer(kind: str, prompt: str, rng: random.Random) -> Answer:
    if kind == "score":
        return _json_answer(_score_answer(rng.choice((0.0, 0.0, 0.3, 0.6, 1.0))))
    article = article_of(prompt)
    words = _words(article)
    picked: list[str] = []
    if words:
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            picked.append(_window(article, words, rng.randrange(len(words)), rng.randint(1, 4)))
    return _json_answer(_spans_answer([p for p in picked if p]))


def _json_answer(data: dict[str, Any]) -> Answer:
    return Answer(data, json.dumps(data, indent=2))


def request_kind(body: dict[str, Any], prompt: str) -> str:
    """``score`` or ``spans``: from the requested schema, else from the prompt's wording."""
    schemas: list[Any] = [t.get("input_schema") for t in body.get("tools") or ()]
    schemas += [(t.get("function") or {}).get("parameters") for t in body.get("tools") or ()]
    response_format = body.get("response_format") or {}
    schemas.append((response_format.get("json_schema") or {}).get("schema"))
    for schema in schemas:
        properties = (schema or {}).get("properties") or {}
        if "score" in properties:
            return "score"
        if "hallucination_list" in properties:
            return "spans"
    return "spans" if "**Generated Article:**" in prompt else "score"


def prompt_of(body: dict[str, Any]) -> str:
    """The prompt text: messages one per line, the text blocks of a message run together
    (a template's static block and its per-item block read as the template renders)."""
    return "\n".join("".join(text for text, _ in blocks) for blocks in _message_blocks(body))


def _message_blocks(body: dict[str, Any]) -> list[list[tuple[str, Any]]]:
    """Per message, its text blocks with their ``cache_control`` (None when unmarked)."""
    messages: list[list[tuple[str, Any]]] = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            messages.append([(content, None)])
        elif isinstance(content, list):
            messages.append(
                [
                    (str(c.get("text", "")), c.get("cache_control"))
                    for c in content
                    if isinstance(c, dict)
                ]
            )
    return messages


# --- wire formats --------------------------------------------------------------------------


def _usage(prompt: str, text: str) -> tuple[int, int]:
    return max(1, _tokens(prompt)), max(1, _tokens(text))


def _tokens(text: str) -> int:
    # The stand-in's tokenizer: about four characters a token, as English text has.
    return len(text) // 4


# --- the providers' prompt caches ----------------------------------------------------------

CACHE_TTL_SECONDS = 300.0
"""How long a cached prefix lives after its last use: both providers' default (5 minutes;
Anthropic's ``"ttl": "1h"`` keeps it an hour)."""
# The providers' cache minimums are the price table's (juryflow.judges.pricing): the shortest
# prefix a breakpoint caches, by model (shorter is sent uncached, no error); any other model,
# ``stub-*`` included, 1,024 tokens; OpenAI from 1,024 tokens in steps of 128.


class PromptCache:
    """The prefixes a stand-in has cached, per model: the first call that sends a prefix
    writes it, later calls read it until it goes ``ttl`` seconds unused.

    Unlike the real services, a prefix counts as written as soon as its first call is
    answered: calls already in flight with it read it too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expires: dict[tuple[str, bytes], float] = {}

    def hit(self, model: str, digest: bytes, ttl: float) -> bool:
        """Whether ``digest`` is cached for ``model`` (a read refreshes it); else it is
        written now."""
        now = time.monotonic()
        key = (model, digest)
        with self._lock:
            cached = self._expires.get(key, 0.0) > now
            self._expires[key] = now + ttl
            return cached

    def longest(self, model: str, digests: list[bytes], ttl: float) -> int:
        """How many of ``digests`` (the digests of ever longer prefixes) are cached, counted
        from the first; every one of them is cached (or refreshed) after the call."""
        now = time.monotonic()
        with self._lock:
            hits = 0
            for digest in digests:
                if self._expires.get((model, digest), 0.0) <= now:
                    break
                hits += 1
            for digest in digests:
                self._expires[(model, digest)] = now + ttl
            return hits


_PROMPT_CACHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PromptCache] = (
    weakref.WeakKeyDictionary()
)


def prompt_cache() -> PromptCache:
    """The prompt cache of the stand-in answering now: one per server, on its own event
    loop; a fresh one outside any loop (an answer built directly, as in unit tests)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return PromptCache()
    cache = _PROMPT_CACHES.get(loop)
    if cache is None:
        cache = _PROMPT_CACHES[loop] = PromptCache()
    return cache


def _anthropic_cache(body: dict[str, Any], model: str) -> tuple[int, int, float]:
    """(tokens written, tokens read, ttl) for a Messages request: the cached prefix runs up
    to the last block marked with ``cache_control`` (with the tools before it), when it
    is at least the model's minimum."""
    messages = _message_blocks(body)
    end: tuple[int, int] | None = None
    ttl = CACHE_TTL_SECONDS
    for m, blocks in enumerate(messages):
        for b, (_, marker) in enumerate(blocks):
            if isinstance(marker, dict) and marker.get("type") == "ephemeral":
                end = (m, b)
                ttl = 3600.0 if marker.get("ttl") == "1h" else CACHE_TTL_SECONDS
    if end is None:
        return 0, 0, ttl
    lines = ["".join(t for t, _ in blocks) for blocks in messages[: end[0]]]
    lines.append("".join(t for t, _ in messages[end[0]][: end[1] + 1]))
    prefix = "\n".join(lines)
    tokens = _tokens(prefix)
    if tokens < anthropic_cache_minimum(model):
        return 0, 0, ttl
    tools = json.dumps(body.get("tools"), sort_keys=True)
    digest = hashlib.sha256(f"{tools}\0{prefix}".encode()).digest()
    if prompt_cache().hit(model, digest, ttl):
        return 0, tokens, ttl
    return tokens, 0, ttl


def _openai_cached_tokens(body: dict[str, Any], model: str, prompt: str) -> int:
    """Tokens of the longest prefix of ``prompt`` seen before for ``model``, at OpenAI's
    steps (1,024 tokens, then every 128); tools and response format are part of it."""
    schema = json.dumps([body.get("tools"), body.get("response_format")], sort_keys=True)
    running = hashlib.sha256(schema.encode())
    digests: list[bytes] = []
    done = 0
    boundary = OPENAI_CACHE_MIN_TOKENS
    while boundary * 4 <= len(prompt):
        running.update(prompt[done : boundary * 4].encode())
        done = boundary * 4
        digests.append(running.copy().digest())
        boundary += OPENAI_CACHE_INCREMENT
    hits = prompt_cache().longest(model, digests, CACHE_TTL_SECONDS)
    return 0 if hits == 0 else OPENAI_CACHE_MIN_TOKENS + (hits - 1) * OPENAI_CACHE_INCREMENT


def anthropic_message(
    body: dict[str, Any], answer: Answer, rule: Rule, prompt: str, number: int
) -> dict[str, Any]:
    use_tool = (
        bool(body.get("tools")) and answer.data is not None and not (rule.text or rule.fenced)
    )
    text = _fence(answer.text) if rule.fenced else answer.text
    if use_tool:
        content: list[dict[str, Any]] = [
            {
                "type": "tool_use",
                "id": f"toolu_stub_{number}",
                "name": TOOL_NAME,
                "input": answer.data,
            }
        ]
    else:
        content = [{"type": "text", "text": text}]
    input_tokens, output_tokens = _usage(prompt, answer.text)
    model = str(body.get("model", ""))
    written, read, ttl = _anthropic_cache(body, model)
    return {
        "id": f"msg_stub_{number}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": "tool_use" if use_tool else "end_turn",
        "stop_sequence": None,
        # As the API counts: input_tokens are those after the cached prefix only.
        "usage": {
            "input_tokens": max(input_tokens - written - read, 0),
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written if ttl == CACHE_TTL_SECONDS else 0,
                "ephemeral_1h_input_tokens": 0 if ttl == CACHE_TTL_SECONDS else written,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        },
    }


def openai_completion(
    body: dict[str, Any],
    answer: Answer,
    rule: Rule,
    prompt: str,
    number: int,
    *,
    dialect: LocalDialect | None = None,
    seed: bytes = b"",
) -> dict[str, Any]:
    plain = answer.data is None or rule.text or rule.fenced or rule.prefixed
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    finish = "stop"
    if not plain and (body.get("tools") or rule.tool):
        message["tool_calls"] = [
            {
                "id": f"call_stub_{number}",
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": json.dumps(answer.data)},
            }
        ]
        finish = "tool_calls"
    elif not plain and body.get("response_format"):
        message["content"] = json.dumps(answer.data)
    else:
        message["content"] = _written(answer, rule, dialect, seed)
    input_tokens, output_tokens = _usage(prompt, answer.text)
    usage: dict[str, Any] = {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }
    if dialect is None:
        cached = _openai_cached_tokens(body, str(body.get("model", "")), prompt)
        # prompt_tokens counts the cached ones too, as the API does
        usage["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
    return {
        "id": f"chatcmpl-stub-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


def _written(answer: Answer, rule: Rule, dialect: LocalDialect | None, seed: bytes) -> str:
    """The answer as text: in the form its model name asks for, else (a local dialect's
    JSON answer) in one a small local model writes, else as it is."""
    if rule.fenced:
        return _fence(answer.text)
    if rule.prefixed:
        return written(answer.text, "prefixed")
    if dialect is None or answer.data is None or rule.text:
        return answer.text
    return written(answer.text, text_form(seed))


def _fence(text: str) -> str:
    return f"```json\n{text}\n```"


def error_body(api: str, status: int, message: str) -> dict[str, Any]:
    kinds = {
        400: ("invalid_request_error", "invalid_request_error"),
        401: ("authentication_error", "invalid_api_key"),
        403: ("permission_error", "permission_denied"),
        404: ("not_found_error", "not_found"),
        429: ("rate_limit_error", "rate_limit_exceeded"),
        500: ("api_error", "server_error"),
    }
    anthropic_type, openai_code = kinds.get(status, ("api_error", "error"))
    if api == "anthropic":
        return {"type": "error", "error": {"type": anthropic_type, "message": message}}
    return {
        "error": {"message": message, "type": anthropic_type, "param": None, "code": openai_code}
    }


# --- the server ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One model request as the stand-in received it."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


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

    def _next_step(self, model: str) -> str | None:
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
                request = await _read_request(reader)
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
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        path = request.path.split("?", 1)[0]
        if not path.startswith("/_"):
            self.stats._request(request.method, request.path, request.headers, request.body)
        from juryflow.standin import batches  # it imports this module: loaded on first use

        if request.method == "GET" and path == "/_stats":
            stats = {**self.stats.snapshot(), "batches": batches.stats_of(self).snapshot()}
            return await _send(writer, 200, stats)
        if request.method == "POST" and path == "/_reset":
            self.stats.reset()
            batches.stats_of(self).reset()
            return await _send(writer, 200, {"ok": True})
        if batches.is_batch_route(path):
            return await batches.handle(self, request, writer)
        if path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith("/chat/completions"):
            api = "openai"
        else:
            return await _send(writer, 404, {"error": {"message": f"no route {path}"}})
        if request.method != "POST":
            return await _send(writer, 405, error_body(api, 400, "use POST"))
        try:
            body = load_json(request.body or b"{}")
        except NestingError as error:
            return await _send(writer, 400, error_body(api, 400, f"body is {error}"))
        except ValueError:
            return await _send(writer, 400, error_body(api, 400, "body is not JSON"))
        if api == "anthropic" and request.headers.get("anthropic-version", "") >= "2026-10-21":
            # Like the real API at this version: sampling parameters are refused.
            sampling = [p for p in ("temperature", "top_p", "top_k") if p in body]
            if sampling:
                message = f"{sampling[0]}: Extra inputs are not permitted"
                return await _send(writer, 400, error_body(api, 400, message))
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
        return await _send(writer, reply.status, content, reply.headers)

    async def _model_call(
        self,
        api: str,
        body: dict[str, Any],
        model: str,
        number: int,
        request: _Request,
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
        request: _Request,
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
        step = self._next_step(model)
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
            fault = rule.fault_for(number - 1) or self._random_fault()

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

    def _random_fault(self) -> str | None:
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


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) < 2:
        return None
    method, path = parts[0].upper(), parts[1]
    headers: dict[str, str] = {}
    for _ in range(200):
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length") or 0)
        body = await reader.readexactly(length) if length else b""
    return _Request(method, path, headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    for _ in range(1_000_000):
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            break
        chunks.append(await reader.readexactly(size))
        await reader.readline()
    return b"".join(chunks)


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    payload: dict[str, Any] | bytes,
    headers: dict[str, str] | None = None,
) -> bool:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: keep-alive",
        f"request-id: req_stub_{time.monotonic_ns()}",
    ]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()
    return True


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
