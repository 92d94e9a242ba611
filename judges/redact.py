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
from collections.abc import Callable, Iterable, Iterator, Mapping
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

# Every pattern below runs over whole model answers (megabytes, from a model or whoever
# steers it), so none may rescan a run of characters from each position inside it: that is
# quadratic, and an answer of 250,000 letters held the event loop for minutes. Each masks
# exactly what its plainer form masked (tests/test_redact_linear.py compares them) and
# follows the same rules:
# - a match that could begin anywhere in a run of name characters begins at the run's
#   first one, and walks to its candidate inside the run once, committed (atomic groups,
#   possessive quantifiers): nothing is ever rescanned from a later start;
# - the character before that run is consumed as "pre" (a newline stands in at the start
#   of the text, see _sub_after_boundary). A pattern that begins with a character class
#   lets re skip, in C, every character that cannot begin a match; a lookbehind, \b or an
#   optional group there would cost a Python-level match attempt at every position;
# - a pattern that begins with a literal or a letter (Basic, AKIA, Bearer, cookie) checks
#   its \b behind it instead.

_SCHEME_CHAR = r"A-Za-z0-9+.\-"
_URL = re.compile(
    # The scheme starts at the first letter of its run, as the leftmost match of
    # [A-Za-z][A-Za-z0-9+.-]*:// does; digits or signs before it are kept as "lead".
    rf"(?P<pre>[^{_SCHEME_CHAR}])(?P<lead>[0-9+.\-]*+)"
    rf"(?P<url>[A-Za-z][{_SCHEME_CHAR}]*+://[^\s'\"<>`]++)"
)
_USERINFO = re.compile(r"(?<=://)[^/?#@\s]*@")
_QUERY_PAIR = re.compile(r"(?P<pre>[&;=#\s])(?P<name>[^&;=#\s]++)=(?P<value>[^&;#\s]*+)")
"""A name=value pair of a query; run it on the query behind "&" (_query_pairs)."""
_HEADER_CHAR_FOLDED = "A-Za-z0-9\\-\u0130\u0131\u017f\u212a"
"""[a-z0-9-] under re.IGNORECASE, which also folds İ ı ſ K (Kelvin) into i i s k."""
_HEADER_LINE = re.compile(
    # A header name ends where its run of [a-z0-9-] ends (the separator follows), so the
    # run is checked for a separator after it first, then walked once to the leftmost place
    # a name may begin: the first "x-" at a word boundary (any later x-...key has less
    # after it for the keyword), else (proxy-)authorization or api-key ending the run. The
    # run is scanned with its folded class spelled out: a plain class is faster to test.
    rf"(?P<pre>(?-i:[^{_HEADER_CHAR_FOLDED}]))(?=(?-i:[{_HEADER_CHAR_FOLDED}]*+)[\"']?\s*[:=])"
    rf"(?P<lead>(?>(?-i:[{_HEADER_CHAR_FOLDED}]*?)\b(?=x-))"
    rf"|(?>(?-i:[{_HEADER_CHAR_FOLDED}]*?)\b(?=(?:(?:proxy-)?authorization|api-key)(?![a-z0-9-]))))"
    r"(?P<name>x-(?>[a-z0-9-]*?(?:token|secret|auth|key))[a-z0-9-]*+"
    r"|(?:proxy-)?authorization|api-key)"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\"'\r\n,;}]+)",
    re.IGNORECASE,
)
_COOKIE_LINE = re.compile(
    # A cookie header is itself a ;-separated list: masked to the end of its line or quote.
    # Its first letter (as re.IGNORECASE folds it) begins the pattern, \b checked behind it.
    r"(?P<name>(?-i:[sS\u017fcC])(?<!\w.)(?:(?<=[sS\u017f])et-cookie|(?<=[cC])ookie))"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\"'\r\n]+)",
    re.IGNORECASE,
)
_BEARER_TOKEN = re.compile(r"(?-i:[Bb])(?<!\w.)earer\s+[^\s'\",;]+", re.IGNORECASE)
_BASIC_TOKEN = re.compile(r"Basic(?<!\wBasic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}")
_KEY_CHAR = "A-Za-z0-9_-"
_KEY_PREFIX = "(?:sk|rk|gsk|xai|hf|ghp|gho|github_pat|glpat)[-_]"
_AIZA = f"AIza[{_KEY_CHAR}]{{20}}"
_KEY_SHAPED = re.compile(
    # sk-... and AIza... keys run to the end of their run of key characters. A word
    # boundary inside the run follows a "-", so the run is walked "-" to "-" to the first
    # prefix: if that sk-like key has no digit or is too short, no later one in the run has
    # either (each has less after it), and the first AIza key long enough is the match.
    rf"(?P<pre>[^{_KEY_CHAR}])(?=[A-Za-z0-9_]*+-|{_KEY_PREFIX}|AIza)"  # a quick "maybe"
    rf"(?:(?P<lead>(?:(?!\b(?:{_KEY_PREFIX}|{_AIZA}))[A-Za-z0-9_]*+-)*+)"
    rf"\b(?:{_KEY_PREFIX}(?=[A-Za-z_-]*+\d)[{_KEY_CHAR}]{{12,}}|{_AIZA}[{_KEY_CHAR}]*+)"
    rf"|(?P<lead2>(?:(?!\b{_AIZA})[A-Za-z0-9_]*+-)*+)\b{_AIZA}[{_KEY_CHAR}]*+)"
)
_AWS_KEY = re.compile(
    # Its own pass, after the others: an AKIA key may end inside a run of key characters,
    # and no sk- or AIza key can begin inside one (no word boundary), so order is harmless.
    r"AKIA(?<!\wAKIA)[0-9A-Z]{12,}"
)
_KEY_PREFIX_BEHIND = "|".join(
    # One lookbehind per length: re needs each of fixed width ("gsk-" ends in "sk-").
    f"(?<={prefix}{{sep}})"
    for prefix in ("[sr]k", "hf", "xai", "gh[po]", "glpat", "github_pat")
)
_KEY_SEPARATORS = tuple(
    # Begins with a literal: re finds each separator about as fast as str.find.
    re.compile(f"{sep}(?:{_KEY_PREFIX_BEHIND.format(sep=sep)})")
    for sep in "-_"
)
_KEY_HINTS = (
    *(
        f"{p}{s}"
        for p in ("sk", "rk", "xai", "hf", "ghp", "gho", "github_pat", "glpat")
        for s in "-_"
    ),
    "AIza",
)
"""Substrings one of which every _KEY_SHAPED match holds ("gsk-" holds "sk-"): looked for
when separators are too many to check each (one in 64 characters)."""
_FOLDED_INTO_ASCII = "\u0130\u0131\u017f\u212a"
"""İ ı ſ K (Kelvin): the characters re.IGNORECASE matches with ASCII letters (i i s k)."""
_FOLD_FOR_HINTS = str.maketrans(dict(zip(_FOLDED_INTO_ASCII, "iisk", strict=True)))

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
    for pair in _query_pairs(parts.query):
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
    query = _mask_query(parts.query)
    fragment = _mask_query(parts.fragment)
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
    if "://" in text:
        text = _sub_after_boundary(
            _URL, lambda m: m["pre"] + m["lead"] + redact_url(m["url"]), text
        )
    return _redact_shapes(text)


def _redact_shapes(text: str) -> str:
    """Header lines, Bearer and Basic credentials, key-shaped tokens; each pass only where
    the words it needs occur (a substring test is tens of times faster than a pass of re)."""
    folded = _folded(text)
    if b"cookie" in folded:
        text = _COOKIE_LINE.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    if _may_hold_header(folded):
        text = _sub_after_boundary(
            _HEADER_LINE, lambda m: f"{m['pre']}{m['lead']}{m['name']}{m['sep']}{MASK}", text
        )
    if b"bearer" in folded:
        text = _BEARER_TOKEN.sub(f"Bearer {MASK}", text)
    text = _BASIC_TOKEN.sub(f"Basic {MASK}", text)
    if _may_hold_key(text):
        text = _sub_after_boundary(
            _KEY_SHAPED, lambda m: m["pre"] + (m["lead"] or m["lead2"] or "") + MASK, text
        )
    return _AWS_KEY.sub(MASK, text)


def _sub_after_boundary(
    pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str], text: str
) -> str:
    """``pattern.sub`` for a pattern that consumes the character before its match: a
    newline, which no pattern here matches but as that character, stands in at the start."""
    return pattern.sub(replace, "\n" + text)[1:]


def _folded(text: str) -> bytes:
    """``text`` as re.IGNORECASE compares it with ASCII letters, lowered, for substring tests
    that tell whether an IGNORECASE pattern can match at all. Other non-ASCII characters
    become "?": encoding and lowering ASCII bytes is several times faster than str.lower."""
    if not text.isascii() and any(c in text for c in _FOLDED_INTO_ASCII):
        text = text.translate(_FOLD_FOR_HINTS)
    return text.encode("ascii", "replace").lower()


def _may_hold_header(folded: bytes) -> bool:
    if b"authorization" in folded or b"api-key" in folded:
        return True
    return b"x-" in folded and any(w in folded for w in (b"token", b"secret", b"auth", b"key"))


def _may_hold_key(text: str) -> bool:
    if "AIza" in text:
        return True
    if text.count("-") + text.count("_") > len(text) // 64:
        return any(hint in text for hint in _KEY_HINTS)
    return any(separator.search(text) for separator in _KEY_SEPARATORS)


def _query_pairs(query: str) -> Iterator[re.Match[str]]:
    return _QUERY_PAIR.finditer("&" + query)


def _mask_query(query: str) -> str:
    """``query`` with the values of key-like names masked (a leading "&" stands for its
    start, see _QUERY_PAIR)."""
    return _QUERY_PAIR.sub(_mask_query_pair, "&" + query)[1:]


def _mask_query_pair(pair: re.Match[str]) -> str:
    if _SENSITIVE_NAME.search(unquote(pair["name"])):
        return f"{pair['pre']}{pair['name']}={MASK}"
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
