"""Long model answers (issue 29, point 7): redaction is linear in its input and masks exactly
what its plain patterns masked; an answer over the size limit is never parsed.

The plain patterns (``_PLAIN_*``, as redact.py had them before issue 29) try every start
position inside a run of letters and rescan it: 0.2 s for 10,000 characters, hours for
2,000,000. Their rewrites must mask the same text; the plain ones stay here as the reference
for a property test on short inputs, where they are fast. The limit is tested end to end:
the official SDKs over HTTP against the stand-in.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import MAX_ANSWER_CHARS, LLMJudge
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.ratelimit import reset_limiters
from juryflow.judges.redact import _SENSITIVE_NAME, MASK, known_secrets, redact_text, redact_url
from juryflow.maths.records import Item, Judgment
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

_PLAIN_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_PLAIN_QUERY_PAIR = re.compile(r"(?P<name>[^&;=#\s]+)=(?P<value>[^&;#\s]*)")
_PLAIN_HEADER_LINE = re.compile(
    r"(?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi-key|\bx-goog-api-key"
    r"|\bx-[a-z0-9-]*(?:token|secret|auth|key)[a-z0-9-]*)"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\"'\r\n,;}]+)",
    re.IGNORECASE,
)
_PLAIN_COOKIE_LINE = re.compile(
    r"(?P<name>\b(?:set-)?cookie)(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\"'\r\n]+)",
    re.IGNORECASE,
)
_PLAIN_BEARER_TOKEN = re.compile(r"\bBearer\s+[^\s'\",;]+", re.IGNORECASE)
_PLAIN_BASIC_TOKEN = re.compile(r"\bBasic\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}")
_PLAIN_KEY_SHAPED = re.compile(
    r"\b(?:sk|rk|gsk|xai|hf|ghp|gho|github_pat|glpat)[-_](?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{12,}"
    r"|\bAIza[0-9A-Za-z_-]{20,}"
    r"|\bAKIA[0-9A-Z]{12,}"
)


def plain_redact(text: str) -> str:
    """What redact_text did before issue 29 (the reference; quadratic)."""
    if not text:
        return text
    for value in sorted(known_secrets(), key=len, reverse=True):
        text = text.replace(value, MASK)
        if len(value) >= 16:
            text = text.replace(value[-8:], MASK)
    text = _PLAIN_URL.sub(lambda m: _plain_redact_url(m.group(0)), text)
    for header in (_PLAIN_COOKIE_LINE, _PLAIN_HEADER_LINE):
        text = header.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    text = _PLAIN_BEARER_TOKEN.sub(f"Bearer {MASK}", text)
    text = _PLAIN_BASIC_TOKEN.sub(f"Basic {MASK}", text)
    return _PLAIN_KEY_SHAPED.sub(MASK, text)


def _plain_redact_url(url: str) -> str:
    from urllib.parse import unquote, urlsplit, urlunsplit

    def mask(pair: re.Match[str]) -> str:
        # Which names are secret is the rule itself, not a pattern rewritten for speed: the
        # reference reads redact.py's list.
        if _SENSITIVE_NAME.search(unquote(pair["name"])):
            return f"{pair['name']}={MASK}"
        return pair.group(0)

    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"(?<=://)[^/?#@\s]*@", f"{MASK}@", url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = _PLAIN_QUERY_PAIR.sub(mask, parts.query)
    fragment = _PLAIN_QUERY_PAIR.sub(mask, parts.fragment)
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


# Pieces of the shapes every pattern cares about, and the characters re.IGNORECASE folds
# into ASCII letters (İ ı ſ and the Kelvin sign), which the cheap pre-checks must not miss.
PIECES = (
    *("x-", "X-", "api-key", "authorization", "Authorization", "proxy-", "goog-", "token"),
    *("key", "secret", "auth", "cookie", "set-", "Bearer ", "bearer", "Basic ", "sk-", "sk_"),
    *("gsk_", "github_pat_", "hf-", "xai-", "glpat-", "AIza", "AKIA", "http://", "://", "ftp"),
    *("a", "b", "1", "9", "Z", "-", "_", ":", "=", " ", "\n", '"', "'", "&", ";", "#", "?"),
    *("@", "/", "é", "١", ",", "}", "+", ".", "<", "%", "\t", "user:pw@", "api_key="),
    *("ABCDEFGHIJKL", "abcdefghijkl", "0123456789", "AAAAAAAAAAAAAAAAAAAA"),
    *("\u0130", "\u0131", "\u017f", "\u212a"),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_redaction_masks_what_the_plain_patterns_masked(text: str) -> None:
    assert redact_text(text) == plain_redact(text)


def test_redact_url_masks_as_before() -> None:
    for url in (
        "https://u:p@h/x?api_key=S1&x=1#token=S2",
        "http://h/?a=b=c&&=x;sig=S3",
        "http://h/?" + "a" * 50 + "=1&pwd=S4",
    ):
        assert redact_url(url) == _plain_redact_url(url)


SECRET = "Zq7-SECRET-VALUE-31c4"
ADVERSARIAL_LENGTH = 2_000_000

# Each shape: a long run that made a plain pattern rescan, then a secret the pass must mask.
SHAPES: dict[str, Callable[[int], str]] = {
    "letters, then a URL": lambda n: "a" * n + f"://user:{SECRET}@host/",
    "letters, a space, a URL": lambda n: "a" * n + f" https://user:{SECRET}@host/",
    "x-x-x-..., then a header": lambda n: "x-" * (n // 2) + f"token: {SECRET}",
    "x-keykey..., then a header": lambda n: "x-" + "key" * (n // 3) + f": {SECRET}",
    "x-x-x-... then a header after a space": lambda n: "x-" * (n // 2) + f" X-Api-Key: {SECRET}",
    "sk-sk-sk-..., then a key": lambda n: "sk-" * (n // 3) + " sk-proj-" + SECRET,
    "sk-sk-sk-...1 (one key)": lambda n: "sk-" * (n // 3) + "1",
    "AIza-AIza-..., then a key": lambda n: "AIza-" * (n // 5) + " AIza" + SECRET + "abcdefgh",
    "a=a=a=... in a query": lambda n: f"https://h/?{'a=' * (n // 2)}&token={SECRET}",
    "a URL without '='": lambda n: "http://h/" + "a/" * (n // 2) + f"?token={SECRET}",
    "a query without '='": lambda n: "http://h/?" + "a" * n + f"&api_key={SECRET}",
    "many quotes, then Bearer": lambda n: '"' * n + f"Authorization: Bearer {SECRET}",
    "Basic Basic ..., then Basic": lambda n: "Basic " * (n // 6) + "Basic dXNlcjpwYXNzMTIzNA==",
    "spaces, then a cookie": lambda n: " " * n + f"Cookie: session={SECRET}",
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_adversarial_shapes_are_redacted_in_linear_time(shape: str) -> None:
    text = SHAPES[shape](ADVERSARIAL_LENGTH)
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(redact_text(text)), daemon=True)
    worker.start()
    # Linear redaction takes well under a second here even on a loaded 2-core machine; the
    # plain patterns took hours. The timeout only tells the two apart: it is not a benchmark.
    worker.join(timeout=60)
    assert result, f"redact_text did not finish on {len(text):,} characters of {shape!r}"
    (clean,) = result
    for secret in (SECRET, "dXNlcjpwYXNzMTIzNA"):
        assert secret not in clean
    if shape == "sk-sk-sk-...1 (one key)":
        assert clean == MASK


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("x-api-\u212aey: hdr-value-1", "hdr-value-1"),  # Kelvin sign: re folds it into k
        ("X-\u017fecret-Header: hdr-value-2", "hdr-value-2"),  # long s
        ("Author\u0131zation: hdr-value-3", "hdr-value-3"),  # dotless i
        ("AUTHOR\u0130ZATION: hdr-value-4", "hdr-value-4"),  # dotted capital I
        ("Coo\u212aie: session=cookie-value-5", "cookie-value-5"),
        ("BEARER bearer-value-6", "bearer-value-6"),
    ],
)
def test_case_folded_names_are_still_masked(text: str, secret: str) -> None:
    # The passes are skipped when their words are absent; the test for absence must see
    # these names as re.IGNORECASE does.
    assert secret not in redact_text(text)
    assert redact_text(text) == plain_redact(text)


# --- the answer size limit, end to end ---------------------------------------------------

KEY = "sk-test-long-answer-0123456789abcdef"
ITEM = Item("long-1", {"input": "List the files.", "output": "I ran ls and found main.py."})


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubHandle]:
    monkeypatch.setenv("JURYFLOW_TEST_LONG_KEY", KEY)
    reset_limiters()
    with running_stub_server(StubConfig()) as handle:
        yield handle
    reset_limiters()


@pytest.fixture
async def judges(stub: StubHandle) -> AsyncIterator[dict[str, LLMJudge]]:
    built: dict[str, LLMJudge] = {}
    for provider in ("anthropic", "openai"):
        base_url = stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url
        spec = JudgeSpec(
            id=f"{provider}-long",
            provider=provider,  # type: ignore[arg-type]
            model="stub-score-0.6",
            prompt="hallucination_score",
            base_url=base_url,
            api_key_env="JURYFLOW_TEST_LONG_KEY",
            timeout=30.0,
            max_attempts=1,
        )
        judge = build_judge(spec)
        assert isinstance(judge, LLMJudge)
        built[provider] = judge
    yield built
    for judge in built.values():
        await judge.aclose()


def too_long(judgment: Judgment, length: int) -> None:
    assert judgment.score is None
    assert judgment.unscored_reason == (
        f"answer too long: {length:,} characters (limit {MAX_ANSWER_CHARS:,})"
    )
    assert judgment.raw_output is not None and len(judgment.raw_output) == MAX_ANSWER_CHARS
    assert judgment.attempts == 1
    assert judgment.usage.output_tokens is not None  # the tokens were spent all the same


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_an_answer_over_the_limit_is_unscored_and_never_parsed(
    stub: StubHandle, judges: dict[str, LLMJudge], provider: str
) -> None:
    judge = judges[provider]
    # A valid answer that would score 0.0, with the key at the start and across the cut.
    start = f'{{"score": 0.0, "reasoning": "{KEY} '
    padding = "x" * (MAX_ANSWER_CHARS - 10 - len(start))
    answer = f'{start}{padding}{KEY} {"y" * 50_000}"}}'
    assert answer.index(KEY, len(start)) == MAX_ANSWER_CHARS - 10
    stub.enqueue(judge.model, "raw:" + answer)
    judgment = await judge.judge(ITEM)
    too_long(judgment, len(answer))
    assert judgment.raw_output is not None
    assert KEY not in judgment.raw_output and KEY[:10] not in judgment.raw_output
    assert judgment.raw_output.startswith('{"score": 0.0, "reasoning": "***')


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_structured_answer_over_the_limit(
    stub: StubHandle, judges: dict[str, LLMJudge], provider: str
) -> None:
    # Through the forced tool call (Anthropic) or the JSON schema (OpenAI): the stored text
    # is the arguments' JSON, measured like a text answer.
    judge = judges[provider]
    stub.enqueue(judge.model, "long-250000")
    judgment = await judge.judge(ITEM)
    length = len('{"score": 0.0, "reasoning": ""}') + 250_000
    too_long(judgment, length)


async def test_an_answer_at_the_limit_is_parsed(
    stub: StubHandle, judges: dict[str, LLMJudge]
) -> None:
    judge = judges["openai"]
    answer = '{"score": 0.3, "reasoning": ""}'
    answer = answer.replace('""', '"' + "x" * (MAX_ANSWER_CHARS - len(answer)) + '"')
    assert len(answer) == MAX_ANSWER_CHARS
    stub.enqueue(judge.model, "raw:" + answer)
    judgment = await judge.judge(ITEM)
    assert judgment.unscored_reason is None
    assert judgment.score == 0.3


def test_bench_redact_runs_at_a_tiny_size() -> None:
    # Its figures are the bench's to print (bench/README.md), never asserted here.
    bench = Path(__file__).resolve().parents[1] / "bench" / "bench_redact.py"
    result = subprocess.run(
        [sys.executable, str(bench), "--sizes", "1000,3000", "--repeats", "1"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for label in ("prose+secrets", "sk-sk-sk-", "at the limit", "distinct near misses"):
        assert label in result.stdout
