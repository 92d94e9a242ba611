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
    r"key|token|secret|sig|pass|pwd|auth|credential|session|cookie|code|jwt|ticket",
    re.IGNORECASE,
)
"""Query parameter and header names whose values are credentials, matched anywhere in the
name: api_key, X-Amz-Signature, passphrase, Azure Functions' ``code``, OAuth's ``code``,
a ``jwt`` or ``ticket``. A harmless name caught by it (``country_code``) only costs a
masked value in what juryflow stores."""

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

# A long text is redacted piece by piece. A pass of re costs 0.17-0.66 s per 30 M characters
# even when it matches nothing, so only the pieces that hold a hint of some pattern go
# through the patterns; the rest is copied. A piece runs from the start of the text or just
# after a ".\n" (a cut) to just after the next ".\n" or to the end. Redacted apart, pieces
# give what one pass of each pattern over the whole text gives (tests/test_redact_pieces.py):
# - No match holds ".\n" or "*\n". A "\n" is in a match only as the character it consumes
#   before itself ("pre", its first), or in a \s run, which each pattern has only after a
#   header or cookie name, a quote, ":" or "=", Bearer or Basic: never after "." or "*".
#   Values, tokens, keys and URLs stop at "\n".
# - A piece's start looks the same as in the whole text: a "\n" before it, the pre that
#   _sub_after_boundary puts there, and that the patterns that check \b behind (cookie,
#   Bearer, Basic, AKIA) see as they see the start of a text. At its end, every match ends
#   before the last "\n" or begins at it (the pre of the next piece's first match), and what
#   a pattern looks ahead at lies inside its match (the header line's) or stops at "." or "*".
# - Each pass keeps the cuts: a match that ends with a cut's "." (a URL, a header or cookie
#   value, a Bearer token) ends, masked, with "." or "***", so the next pass sees ".\n" or
#   "*\n" there.
# - A piece that holds none of the hints below is left alone by every pass: each match of
#   each pattern holds one of them (in the text as _folded folds and lowers it: a few more
#   pieces than needed go through the patterns, never fewer), and no mask creates one.
# Short texts take the whole-text path: the search for hints would cost more than it saves.
_PIECEWISE_FROM = 65_536
_CUT = b".\n"
_WORD_HINTS = (b"://", b"authorization", b"cookie", b"bearer", b"basic", b"akia", b"aiza")
"""In a URL, a (proxy-)authorization header, a cookie line, Bearer, Basic, AKIA, AIza."""
_SEPARATED_HINTS = {
    sep: tuple(h.lower().encode() for h in (*_KEY_HINTS, "x-", "api-") if h.endswith(sep))
    for sep in "-_"
}
"""x- and api-key headers, sk-/gsk_/ghp_... keys: hints that end with a separator."""
_SEPARATED_HINT_SCANS = {
    # Begins with a literal, as _KEY_SEPARATORS: re finds each separator about as fast as
    # bytes.find, then looks behind it for each prefix; one scan instead of ten.
    sep: re.compile(
        re.escape(sep).encode()
        + b"(?:"
        + b"|".join(b"(?<=" + re.escape(hint) + b")" for hint in hints)
        + b")"
    )
    for sep, hints in _SEPARATED_HINTS.items()
}
_MERGE_GAP = 512
"""Pieces with a hint this close together are redacted as one: fewer, longer calls."""
_BLOCK = 1 << 20
"""Hints are searched a block at a time, so that a text that turns out to have no pieces
worth the trouble is given up early."""
_MOST_COVERED = 0.5
"""Windows covering more of a text than this share save too little: the whole path is taken."""
_BYTES_PER_HINT = 1024
"""Pieces with a hint cost a few microseconds each to find, about what the whole path costs
for this many characters: thicker than that, the whole path is cheaper."""

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
    text = _without_known(text, secrets)
    if len(text) < _PIECEWISE_FROM:
        return _redact_patterns(text)
    folded = _folded(text)
    windows = _hint_windows(folded)
    if windows is None:
        return _redact_patterns(text, folded)
    return _redact_windows(text, windows)


def _redact_windows(text: str, windows: Iterable[tuple[int, int]]) -> str:
    """``text`` with the patterns run on each window (in order, apart, from cut to cut) and
    the text between them copied."""
    parts: list[str] = []
    done = 0
    for start, end in windows:
        parts += (text[done:start], _redact_patterns(text[start:end]))
        done = end
    parts.append(text[done:])
    return "".join(parts)


def _redact_whole(text: str, secrets: Iterable[str | None] = ()) -> str:
    """redact_text with every pattern run over the whole text: what redact_text returns
    (tests/test_redact_pieces.py compares the two), and its path for short texts."""
    if not text:
        return text
    return _redact_patterns(_without_known(text, secrets))


def _without_known(text: str, secrets: Iterable[str | None]) -> str:
    values = {s.strip() for s in secrets if s and len(s.strip()) >= MIN_SECRET_LENGTH}
    values |= known_secrets()
    # Longest first: a key that contains another secret is removed whole.
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
        if len(value) >= 2 * _TAIL_LENGTH and value[-_TAIL_LENGTH:] in text:
            text = text.replace(value[-_TAIL_LENGTH:], MASK)
    return text


def _redact_patterns(text: str, folded: bytes | None = None) -> str:
    """Every credential shape masked, one pass of re per pattern that may match; ``folded``
    is ``_folded(text)`` when the caller has it."""
    if "://" in text:
        text = _sub_after_boundary(
            _URL, lambda m: m["pre"] + m["lead"] + redact_url(m["url"]), text
        )
        folded = None  # the URLs' credentials are masked now: fold what is left
    return _redact_shapes(text, folded)


def _redact_shapes(text: str, folded: bytes | None = None) -> str:
    """Header lines, Bearer and Basic credentials, key-shaped tokens; each pass only where
    the words it needs occur (a substring test is tens of times faster than a pass of re)."""
    if folded is None:
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


def _hint_windows(folded: bytes) -> list[tuple[int, int]] | None:
    """Runs of whole pieces (see _PIECEWISE_FROM) that hold every hint of ``folded``, in
    order; None as soon as they would cover half of it or come too thick to be worth a
    call each, so that a text without that structure pays little before its whole path."""
    size = len(folded)
    windows: list[tuple[int, int]] = []
    total = 0
    for found, (start, end) in enumerate(_hint_pieces(folded), 1):
        if windows and start - windows[-1][1] <= _MERGE_GAP:
            merged, before = windows.pop()
            total -= before - merged
            start = merged
        windows.append((start, end))
        total += end - start
        if total > size * _MOST_COVERED or found > end // _BYTES_PER_HINT + 64:
            return None
    return windows


def _hint_pieces(folded: bytes) -> Iterator[tuple[int, int]]:
    """For each hint in ``folded``, in order, the piece that holds it, or the run of pieces
    from the end of the last one yielded (each from a cut or the start to a cut or the end).

    Each stretch of ``folded`` is searched once for each hint and once for cuts: hints inside
    a piece already yielded are skipped, not found one by one.
    """
    size = len(folded)
    covered = block = 0  # where the last piece yielded ends (a cut, or the start)
    while block < size:
        stop = min(block + _BLOCK, size)
        scans = _hint_scans(folded, block, stop)
        upcoming = [scan(block) for scan in scans]
        while (hint := min(upcoming)) < stop:
            # From the last cut at or before the hint to the first cut after it: a hint
            # holds no "\n", so neither cut falls inside it.
            cut = folded.rfind(_CUT, covered, hint)
            start = cut + len(_CUT) if cut >= 0 else covered
            cut = folded.find(_CUT, hint)
            covered = cut + len(_CUT) if cut >= 0 else size
            yield start, covered
            upcoming = [
                scan(covered) if at < covered else at
                for scan, at in zip(scans, upcoming, strict=True)
            ]
        block = max(stop, covered)


def _hint_scans(folded: bytes, block: int, stop: int) -> list[Callable[[int], int]]:
    """For each hint, a function that finds, from a position on, the next place in
    ``folded[block:stop]`` where one ends: the place of its last character (``len(folded)``
    when there is none). A hint is in the block where it ends, whichever way it is found."""
    size = len(folded)

    def finding(needle: bytes) -> Callable[[int], int]:
        last = len(needle) - 1

        def scan(start: int) -> int:
            found = folded.find(needle, max(start - last, 0), stop)
            return found + last if found >= 0 else size

        return scan

    def searching(pattern: re.Pattern[bytes]) -> Callable[[int], int]:
        def scan(start: int) -> int:
            # Its match is the separator alone, which ends the hint: it looks behind it at
            # the prefix, before ``start`` too.
            found = pattern.search(folded, start, stop)
            return found.start() if found else size

        return scan

    scans = [finding(needle) for needle in _WORD_HINTS]
    for sep, hints in _SEPARATED_HINTS.items():
        if folded.count(sep.encode(), block, stop) > (stop - block) // 64:
            # Separators everywhere ("x-x-x-"): one look behind each would cost more than
            # a search for each hint.
            scans += [finding(hint) for hint in hints]
        else:
            scans.append(searching(_SEPARATED_HINT_SCANS[sep]))
    return scans


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
