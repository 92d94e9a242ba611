"""What the stand-in answers and counts: its settings, its counters, the rules a model
name scripts and the answers (Anthropic Messages, OpenAI Chat Completions) it makes.

Pure of the HTTP server (:mod:`juryflow.standin.server`), so that the batch routes
(:mod:`juryflow.standin.batches`) answer their requests with the same code and import
neither the server nor its private names.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import threading
import time
import weakref
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from juryflow.judges.providers.anthropic import cache_minimum as anthropic_cache_minimum
from juryflow.judges.providers.base import REASONING_STEPS, TOOL_NAME
from juryflow.judges.providers.openai import CACHE_INCREMENT as OPENAI_CACHE_INCREMENT
from juryflow.judges.providers.openai import CACHE_MIN_TOKENS as OPENAI_CACHE_MIN_TOKENS
from juryflow.standin.dialects import LocalDialect, local_dialect, text_form, written
from juryflow.standin.http_wire import WireRequest
from juryflow.standin.pairwise_sim import pair_reply
from juryflow.standin.simulator import Gold, sim_answer

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
    reasoning = {step: f"stub: {step.replace('_', ' ')}" for step in REASONING_STEPS}
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
    if simulated.kind == "pair" and simulated.verdict is not None:
        return _json_answer(pair_reply(simulated.verdict))
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


class ServerState(Protocol):
    """What the batch routes use of the running server: its settings and counters, and the
    draws that make its answers (scripted steps, random faults, sampled repeats), so that a
    request answered in a batch is answered as in real time."""

    config: StubConfig
    stats: StubStats

    def next_step(self, model: str) -> str | None:
        """The next scripted step of ``model`` (None when its script is done)."""
        ...

    def random_fault(self) -> str | None:
        """A fault drawn at the configured rates, or None."""
        ...

    def draw_for(self, body: dict[str, Any], model: str, prompt: str) -> int:
        """Which draw of (``model``, ``prompt``) this answer is."""
        ...
