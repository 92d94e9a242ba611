"""One copy of a text with span layers over it: `segments` and the `_overlay.html` macros."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.pages.overlay import JUDGE_COLOURS, JUDGE_LINE_STYLES, Layer, segments
from juryflow.pages.templating import TEMPLATES_DIR, environment

KEYS = ("j0", "j1", "j2", "consensus", "gold")


@st.composite
def texts_and_layers(draw: st.DrawFn) -> tuple[str, list[Layer]]:
    text = draw(st.text(alphabet="ab <>&\"'\n", max_size=40))
    # offsets may fall outside the text, be empty or reversed: segments clips and drops them
    offset = st.integers(min_value=-3, max_value=len(text) + 3)
    keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=len(KEYS)))
    layers = [
        Layer(key, key.upper(), draw(st.lists(st.tuples(offset, offset), max_size=5)))
        for key in keys
    ]
    return text, layers


def _covering(text: str, layers: list[Layer]) -> list[tuple[str, ...]]:
    """The reference: for each character, the layers with a span over it."""
    return [
        tuple(layer.key for layer in layers if any(s <= i < e for s, e in layer.spans))
        for i in range(len(text))
    ]


@settings(deadline=None)  # a loaded 2-core machine misses Hypothesis' 200 ms
@given(texts_and_layers())
def test_segments_partition_the_text_and_carry_exactly_the_covering_layers(
    case: tuple[str, list[Layer]],
) -> None:
    text, layers = case
    cut = segments(text, layers)
    # a partition: in order, contiguous, non-empty, from 0 to the end, text = the slice
    assert "".join(s.text for s in cut) == text
    position = 0
    for segment in cut:
        assert segment.start == position < segment.end
        assert segment.text == text[segment.start : segment.end]
        position = segment.end
    assert position == len(text)
    # every character of a segment is covered by exactly the segment's layers, in layer order
    reference = _covering(text, layers)
    for segment in cut:
        for i in range(segment.start, segment.end):
            assert segment.layers == reference[i], (i, segment)


@settings(deadline=None)  # a loaded 2-core machine misses Hypothesis' 200 ms
@given(texts_and_layers())
def test_the_text_macro_renders_the_text_once_with_each_segments_layers(
    case: tuple[str, list[Layer]],
) -> None:
    text, layers = case
    macros = environment().get_template("_overlay.html").module
    page = str(macros.overlay(segments(text, layers), layers, "b1"))
    found = _read(page)
    assert "".join(t for t, _ in found) == text
    reference = _covering(text, layers)
    position = 0
    for chunk, keys in found:
        for i in range(position, position + len(chunk)):
            assert keys == set(reference[i])
        position += len(chunk)


class _Segments(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, set[str]]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._stack: list[str | None] = []
        self._in_text = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        classes = (a.get("class") or "").split()
        if tag == "div" and "overlay-text" in classes:
            self._in_text = True
        elif self._in_text and tag == "span":
            self._stack.append(next((c[2:] for c in classes if c.startswith("L-")), None))

    def handle_endtag(self, tag: str) -> None:
        if self._in_text and tag == "span":
            self._stack.pop()
        elif tag == "div":
            self._in_text = False

    def handle_data(self, data: str) -> None:
        if self._in_text:
            self.found.append((data, {k for k in self._stack if k is not None}))


def _read(page: str) -> list[tuple[str, set[str]]]:
    parser = _Segments()
    parser.feed(page)
    return parser.found


HOSTILE = ("<script>alert(1)</script>", '"><img onerror=x>')


def test_the_macros_escape_text_and_labels() -> None:
    text = f"ok {HOSTILE[0]} and {HOSTILE[1]} end"
    start = text.index("<script>")
    layers = [
        Layer("j0", HOSTILE[1], [(start, start + 8)]),
        Layer("consensus", HOSTILE[0], [(0, len(text))]),
    ]
    macros = environment().get_template("_overlay.html").module
    page = str(macros.overlay(segments(text, layers), layers, "b1"))
    parser = _Segments()
    parser.feed(page)
    names = [tag for tag, _ in parser.tags]
    assert "script" not in names and "img" not in names
    assert "&lt;script&gt;" in page and "&#34;&gt;&lt;img onerror=x&gt;" in page
    # the labels, in the legend and in each segment's tooltip, stay text too
    assert '<span class="swatch L-j0">&#34;&gt;&lt;img onerror=x&gt;</span>' in page
    assert 'title="&#34;&gt;&lt;img onerror=x&gt;, &lt;script&gt;' in page
    assert "".join(t for t, _ in parser.found) == text
    legend = str(macros.legend(layers, "b1"))
    assert legend.count('type="checkbox" checked') == 2
    assert str(macros.text(segments(text, []))).count("<span") == 1


def test_judge_colours_are_the_stylesheets() -> None:
    css = (Path(TEMPLATES_DIR) / "_overlay.css").read_text(encoding="utf-8")
    for k, (colour, style) in enumerate(zip(JUDGE_COLOURS, JUDGE_LINE_STYLES, strict=True)):
        rule = re.search(rf"\.overlay-text \.L-j{k} \{{([^}}]*)\}}", css)
        assert rule is not None, k
        assert f"border-bottom: 2px {style} {colour};" in rule.group(1)
        assert f'input[data-layer="j{k}"]:not(:checked)' in css
    for key in ("consensus", "gold", "annotation"):
        assert f'input[data-layer="{key}"]:not(:checked)' in css
