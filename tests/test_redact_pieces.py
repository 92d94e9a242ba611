"""Long texts are redacted piece by piece (issue 29, point 7): only the pieces, cut after
".\\n", that hold a hint of some pattern go through the patterns. The result must be exactly
what one pass of each pattern over the whole text gives (``_redact_whole``, the path short
texts take): these properties compare the two on texts assembled from the shapes each
pattern cares about, around cuts, with case variants and the characters re.IGNORECASE
folds into ASCII letters (İ ı ſ K).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.judges import redact
from juryflow.judges.redact import (
    MASK,
    _folded,
    _hint_pieces,
    _hint_windows,
    _redact_patterns,
    _redact_whole,
    _redact_windows,
    redact_text,
)

KEY = "sk-proj-Zq7x31c4a9b8c7d6e5f4"

FILLER = (
    # prose, cuts and what may stand around them: what most of a long answer is
    *("The answer is short", " see the docs", "ok", "a", "Z9", "value-123", "s3cr3t", "tok"),
    *(".\n", ".\n", "\n", "\n\n", "\r\n", " ", "  ", "\t", ".", "*", MASK, ",", ";", "}"),
    *('"', "'", ":", "=", "-", "_", "&", "#", "?", "/", "@", "é", ". \n", ".\n.\n"),
)
SHAPES = (
    # URLs with keys, userinfo, a "." or a masked value before a cut
    *("https://user:pw@host/x?api_key=" + KEY + "&page=2", "http://h/?token=abc.", "://"),
    *("ftp://u@h.", "HTTPS://h/#key=v.", "x://?.", "http://[::1/?key=v", "https://h/a.b?sig=z."),
    *("http://h/?cookie=abc.", "1+http://h/?pwd=", "https://h/", "?api_key=", "&secret="),
    # header lines: names, separators with quotes and newlines, values
    *("X-Api-Key: ", "x-api-key:", "X-Goog-Api-Key =", "x-x-key", "X-Auth-Token", "x-"),
    *("Authorization: ", "authorization\n:", "Proxy-Authorization: ", "api-key=", "api-"),
    *('"api-key": "', "'X-Auth-Token'\n: '", "x-api-\u212aey:", "AUTHOR\u0130ZATION:"),
    *("Author\u0131zation:", "X-\u017fecret-Header: ", "authorization", "key", "token"),
    # cookie lines
    *("Cookie: session=abc", "Set-Cookie:", "\u017fet-cookie=", "Coo\u212aie:", "cookie\n="),
    # Bearer and Basic, also split by newlines
    *("Bearer ", "bearer\n", "BEARER\n\n", "Bearer", "Basic ", "Basic\n", "Basic\n\n"),
    *("dXNlcjpwYXNzMTIzNA==", "abcdefgh1", "abc.def", "tok.", "YWxhZGRpbjpvcGVu"),
    # whole credentials, which most often stand alone in their piece
    *("Basic dXNlcjpwYXNzMTIzNA==", "Basic\n\tQWxhZGRpbjpvcGVuU2VzYW1l", "Bearer tok.en-1"),
    *("X-Api-Key: " + KEY, "Cookie: session=abc.", "http://u:p@h/?key=v.", "api-key=\n9"),
    # key shapes
    *(KEY, "sk_live_0123456789abcdef", "gsk_abcdefghij1234", "ghp_0123456789abcdefABCD"),
    *("github_pat_11ABCDEFG0123456789", "AIzaSyA1234567890abcdefghijklmnop", "AKIA"),
    *("AKIAIOSFODNN7EXAMPLE", "akiaiosfodnn7example", "AIza", "sk-", "SK-", "hf_", "xai-"),
    *("ABCDEFGHIJKL", "0123456789", "\u0130", "\u0131", "\u017f", "\u212a"),
)


def _variant(fragment: str, swap: bool) -> str:
    return fragment.swapcase() if swap else fragment


FRAGMENT = st.one_of(
    # Filler half the time: pieces with a single shape in them, or none, are common.
    st.sampled_from(FILLER),
    st.builds(_variant, st.sampled_from(SHAPES), st.booleans()),
)
TEXTS = st.lists(FRAGMENT, max_size=40).map("".join)


def _pieces(text: str) -> list[str]:
    """``text`` cut after every ".\\n"."""
    return re.split(r"(?<=\.\n)", text)


@settings(max_examples=3000, deadline=None)
@given(TEXTS)
def test_no_match_crosses_a_cut(text: str) -> None:
    # Every piece apart, hint or not: the cut points alone must not change a thing.
    apart = "".join(_redact_patterns(piece) for piece in _pieces(text))
    assert apart == _redact_patterns(text)


@settings(max_examples=3000, deadline=None)
@given(TEXTS, st.integers(min_value=1, max_value=64))
def test_only_the_pieces_with_a_hint_change(text: str, block: int) -> None:
    # The pieces found for the hints, searched in blocks of ``block`` characters (a hint
    # across a block's end included), redacted apart, the rest copied.
    with patch.object(redact, "_BLOCK", block):
        pieces = list(_hint_pieces(_folded(text)))
    # Against the patterns alone: the secrets other tests of this process made known are
    # removed from the whole text before any window, by redact_text, not by the windows.
    assert _redact_windows(text, pieces) == _redact_patterns(text)
    for (_, end), (start, _) in itertools.pairwise(pieces):
        assert end <= start


@settings(max_examples=2000, deadline=None)
@given(TEXTS, st.integers(min_value=0, max_value=40), st.booleans())
def test_redact_text_equals_the_whole_text_path(text: str, gap: int, secret: bool) -> None:
    # The public path with long-text handling on at any length, merging pieces up to
    # ``gap`` characters apart, never giving up for the whole path.
    secrets = ("Zq7x31c4a9b8c7d6e5f4",) if secret else ()
    with (
        patch.object(redact, "_PIECEWISE_FROM", 0),
        patch.object(redact, "_MERGE_GAP", gap),
        patch.object(redact, "_MOST_COVERED", 1.0),
        patch.object(redact, "_BYTES_PER_HINT", 1),
        patch.object(redact, "_BLOCK", 16),
    ):
        assert redact_text(text, secrets) == _redact_whole(text, secrets)


def _bench_shapes() -> dict[str, Callable[[int], str]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        import bench_redact
    finally:
        sys.path.pop(0)
    shapes: dict[str, Callable[[int], str]] = bench_redact.shapes()
    return shapes


@pytest.mark.parametrize(
    "shape", ["prose", "prose+secrets", "json answer", "sk-sk-sk-", "x-x-x-", "AKIA between ends"]
)
def test_bench_shapes_at_a_real_length(shape: str) -> None:
    text = _bench_shapes()[shape](300_000)
    assert redact_text(text) == _redact_whole(text)


def test_which_path_a_long_text_takes() -> None:
    shapes = _bench_shapes()
    # Prose: no piece to redact. With secrets every 10,000 characters: a window for each,
    # a small share of the text; the secrets are gone.
    assert _hint_windows(_folded(shapes["prose"](300_000))) == []
    text = shapes["prose+secrets"](300_000)
    windows = _hint_windows(_folded(text))
    assert windows is not None and 25 <= len(windows) <= 35
    assert sum(end - start for start, end in windows) < len(text) // 4
    assert KEY not in redact_text(text)
    # No cut at all, or a hint in every few characters: the whole path.
    assert _hint_windows(_folded("x-" * 100_000)) is None
    assert _hint_windows(_folded("sk-1.\n" * 20_000)) is None


def test_case_folded_hints_far_apart_in_a_long_text() -> None:
    # Hints re only matches through case folding, each in its own piece of a long text.
    filler = "Nothing to see here.\n" * 2_000
    lines = (
        "x-api-\u212aey: hdr-value-1\n",
        "X-\u017fecret-Header: hdr-value-2\n",
        "Author\u0131zation: hdr-value-3\n",
        "AUTHOR\u0130ZATION: hdr-value-4\n",
        "Coo\u212aie: session=cookie-value-5\n",
        "BEARER bearer-value-6.\n",
    )
    text = filler + filler.join(lines) + filler
    assert len(text) > redact._PIECEWISE_FROM
    windows = _hint_windows(_folded(text))
    assert windows is not None and len(windows) == len(lines)
    clean = redact_text(text)
    assert clean == _redact_whole(text)
    for number in range(1, 7):
        assert f"value-{number}" not in clean
