"""Keeping credentials out of everything juryflow records: store, journal, logs, reports.

Secrets reach text by several roads: a server echoes the request's headers or key in its
error body, a ``base_url`` carries ``user:password@`` or ``?api_key=``, an SDK exception
quotes the URL it called. Two defences work together here:

- values juryflow knows are secret (the API keys it resolved, panel header values, URL
  credentials) are remembered per process and removed wherever they appear;
- shapes that are secret whatever their value (``Bearer …``, ``sk-…`` keys, header lines
  such as ``x-api-key: …``, URL userinfo and key-like query parameters) are masked too, so
  a secret juryflow never saw (a proxy's own token, say) is caught as well.

Everything here is pure string work and never raises on odd input: a redactor that fails
would turn a recorded error into a crash.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"

MIN_SECRET_LENGTH = 4
"""Shorter values are not remembered: replacing every "ab" in a message helps nobody."""

MIN_PLAIN_HEADER_LENGTH = 8
"""Header values under a harmless name (``anthropic-beta: tools``) count from this length."""

_TAIL_LENGTH = 8
"""Error bodies sometimes quote only a key's end ("Incorrect API key: sk-...abcd1234")."""

_SENSITIVE_NAME = re.compile(
    r"key|token|secret|sig|password|passwd|pwd|auth|credential|session|cookie", re.IGNORECASE
)
"""Query parameter and header names whose values are credentials (api_key, X-Amz-Signature)."""

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_USERINFO = re.compile(r"(?<=://)[^/?#@\s]*@")
_QUERY_PAIR = re.compile(r"(?P<name>[^&;=#\s]+)=(?P<value>[^&;#\s]*)")
_HEADER_LINE = re.compile(
    r"(?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi-key|\bx-goog-api-key"
    r"|\bx-[a-z0-9-]*(?:token|secret|auth|key)[a-z0-9-]*)"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\"'\r\n,;}]+)",
    re.IGNORECASE,
)
_COOKIE_LINE = re.compile(
    # A cookie header is itself a ;-separated list: masked to the end of its line or quote.
    r"(?P<name>\b(?:set-)?cookie)(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\"'\r\n]+)",
    re.IGNORECASE,
)
_BEARER_TOKEN = re.compile(r"\bBearer\s+[^\s'\",;]+", re.IGNORECASE)
_BASIC_TOKEN = re.compile(r"\bBasic\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}")
_KEY_SHAPED = re.compile(
    r"\b(?:sk|rk|gsk|xai|hf|ghp|gho|github_pat|glpat)[-_](?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{12,}"
    r"|\bAIza[0-9A-Za-z_-]{20,}"
    r"|\bAKIA[0-9A-Z]{12,}"
)

HTTP_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "anthropic._base_client",
    "openai._base_client",
)
"""Loggers of the HTTP stack under the SDKs: at DEBUG they print each request's full URL
(``user:password@`` included) and the response headers. A logger's filters see only the
records of that very logger, not its children's, so each is named."""

_known: set[str] = set()
_known_lock = threading.Lock()


def remember_secret(*values: str | None) -> None:
    """Treat ``values`` as secret in this process from now on (empty and short ones ignored)."""
    usable = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_LENGTH}
    if usable:
        with _known_lock:
            _known.update(usable)


def known_secrets() -> frozenset[str]:
    with _known_lock:
        return frozenset(_known)


def url_secrets(url: str | None) -> list[str]:
    """The credentials ``url`` carries: user, password, their Basic header, key-like query values.

    The Basic form matters because httpx turns ``user:pass@`` into an ``Authorization: Basic``
    header, which is what an echoing server sends back.
    """
    if not url:
        return []
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return []
    found: list[str] = []
    if username or password:
        user, secret = unquote(username or ""), unquote(password or "")
        found += [user, secret, f"{user}:{secret}"]
        basic = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
        found.append(basic)
    for pair in _QUERY_PAIR.finditer(parts.query):
        if _SENSITIVE_NAME.search(pair["name"]) and pair["value"]:
            found += [pair["value"], unquote(pair["value"])]
    return [value for value in found if len(value) >= MIN_SECRET_LENGTH]


def header_secrets(headers: Mapping[str, str] | None) -> list[str]:
    """Values of configured headers that may be credentials, with any ``Bearer`` stripped."""
    found: list[str] = []
    for name, value in (headers or {}).items():
        value = str(value).strip()
        minimum = MIN_SECRET_LENGTH if _SENSITIVE_NAME.search(name) else MIN_PLAIN_HEADER_LENGTH
        if len(value) < minimum:
            continue
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token.strip() and scheme.lower() in ("bearer", "basic", "token"):
            found.append(token.strip())
    return found


def redact_url(url: str) -> str:
    """``url`` with ``user:password@`` as ``***@`` and key-like query values as ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        # Not a URL the parser accepts (an unbalanced IPv6 bracket, say): mask by shape.
        return _USERINFO.sub(f"{MASK}@", url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = _QUERY_PAIR.sub(_mask_query_pair, parts.query)
    fragment = _QUERY_PAIR.sub(_mask_query_pair, parts.fragment)
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without any known or given secret, credential-shaped token or URL credential."""
    if not text:
        return text
    values = {s.strip() for s in secrets if s and len(s.strip()) >= MIN_SECRET_LENGTH}
    values |= known_secrets()
    # Longest first: a key that contains another secret is removed whole.
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
        if len(value) >= 2 * _TAIL_LENGTH and value[-_TAIL_LENGTH:] in text:
            text = text.replace(value[-_TAIL_LENGTH:], MASK)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    for header in (_COOKIE_LINE, _HEADER_LINE):
        text = header.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    text = _BEARER_TOKEN.sub(f"Bearer {MASK}", text)
    text = _BASIC_TOKEN.sub(f"Basic {MASK}", text)
    return _KEY_SHAPED.sub(MASK, text)


def _mask_query_pair(pair: re.Match[str]) -> str:
    if _SENSITIVE_NAME.search(unquote(pair["name"])):
        return f"{pair['name']}={MASK}"
    return pair.group(0)


class RedactingFilter(logging.Filter):
    """Cleans each record's message before any handler formats it (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed record is the logging module's to report
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_FILTER = RedactingFilter()


def protect_logs(names: Iterable[str] = HTTP_LOGGERS) -> None:
    """Attach the redacting filter to the loggers ``names`` (once each)."""
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
