"""Simulated judges of known quality for the stand-in server, driven by a dataset's gold labels.

A ``stub-sim-...`` model (see :mod:`juryflow.standin.server`) finds the judged response in its
prompt, looks its human labels up in :class:`Gold` and answers like a judge whose recall,
false-span share, sensitivity and specificity are set by its name, so consensus reducers
and calibration can be checked over real HTTP against judges whose quality is known.
A third family, ``sim-pair``, judges two answers to one input against each other (which
one is better, or a tie): its truth, parameters and seeding (by the whole prompt, so the
two orders of one pair are independent draws) are in :mod:`juryflow.standin.pairwise_sim`.

Grammar: ``sim-spans``, ``sim-score`` or ``sim-pair`` followed by ``-<letter><value>``
parameters in any order, each at most once, values in [0, 1]:

=======  ========  ===========================================================================
family   param     meaning (default)
=======  ========  ===========================================================================
spans    ``r``     recall: chance of returning each gold span (1)
spans    ``f``     false-span share: of the spans returned, about this share are false (0);
                   false spans are word runs outside gold spans, sized like gold spans, spread
                   over all items (clean ones too) at ``r * g * f / (1 - f)`` per item, ``g``
                   the gold set's spans per item, so span precision is about ``1 - f``
spans    ``j``     boundary jitter: chance a returned span gains or loses a word at one end (0)
spans    ``n``     near miss: chance a returned span is re-cased and/or gets a trailing
                   period, so only normalised anchoring finds it (0)
spans    ``o``     over-flagger: chance of flagging a whole sentence of a *clean* response,
                   on top of ``f`` (0)
score    ``s``     sensitivity: chance a hallucinated response scores 0.3-1.0, else 0.0 (1)
score    ``p``     specificity: chance a clean response scores 0.0, else 0.3 (two times in
                   three) or 0.6 (1)
score    ``m``     mild: chance a mild case (one gold span, under 15% of the response) scores
                   0.3 rather than 0.6, so a ``> 0.5`` threshold misses it (0)
both     ``b``     broken: chance the answer is truncated JSON, so the judgment is unscored (0)
both     ``L``     length bias: chance that a clean response *longer* than the median length
                   of the gold set's clean responses is flagged, and that a hallucinated
                   response *not longer* than the median of the hallucinated ones is passed
                   (0); so, for a judge otherwise right on the verdict, the flag rate of long
                   responses exceeds that of short ones by ``L`` within each gold stratum,
                   the length effect ``juryflow agreement --bias`` measures
both     ``F``     flip: chance the verdict is the opposite of gold's, whatever the length (0)
both     ``S``     self-preference, with ``@FAMILY`` ending the name (``sim-score-S0.3@meta``):
                   chance that a hallucinated response written by a model of that family
                   (:mod:`juryflow.judges.providers.families`, from the dataset's ``model``
                   column) is passed, and that a clean response by another family is flagged
                   (0); so the flag rate on the family's responses is ``S`` below the others'
                   within each gold stratum, for a judge otherwise right on the verdict
pair     ``a``     accuracy: chance of the true verdict, else one of the other two (1)
pair     ``P``     position bias: chance, drawn before ``a``, of verdict "A" (the answer
                   shown first) whatever the content (0)
pair     ``b``     broken: as above (0)
=======  ========  ===========================================================================

A response the judge is made to flag (``L``, ``F``, ``S``) scores 0.6, or has one whole sentence
flagged (the whole text when no sentence of 20 characters is found once); one it is made to
pass scores 0.0 or has no span. At ``L``, ``F`` and ``S`` 0 no extra draw is made, so a judge's
answers without them are the same as before they existed. The upper-case letters are the
biases, which the name-parsing keeps apart from the lower-case quality parameters.

A detected hallucination scores 1.0 when gold spans cover at least 40% of the response or
number four or more, 0.6 for two or three (or when the gold set has a verdict but no spans),
and 0.6 (or 0.3, see ``m``) for a single span.

Answers are drawn from an RNG seeded by (server seed, full model name, response text): the
same judge answers the same item the same way across runs, providers and concurrency, and
judges with different names (options such as ``+ms50`` included) err independently. Gold
spans are returned exactly as labelled, so one whose text occurs several times in the
response is anchored the way the anchoring treats any repeated string; false spans and
over-flagged sentences are cut only where their text occurs once. A response absent from
the gold set (or a server without one) gets the seeded ``random`` answer instead.

Sampling: a request with ``temperature`` above 0 is answered from an RNG seeded also by its
draw ``k``, the number of identical (model, prompt) sampled requests the server process
answered before it (:class:`juryflow.standin.server.SampleDraws`). Draw 0 keeps the seed
above exactly, so temperature-0 answers, and the first sample of each item, are
byte-identical to the answers before sampling existed; the draws 1, 2, ... are independent
answers of the same judge, so ``F``, ``j``, ``r``, ``f``, ``b`` (every drawn parameter) act
as noise between the samples of one item, while a judge's answers to one item at
temperature 0 stay copies of each other. The draws count arrivals, so which of N
concurrent samples gets which draw is not fixed, only that the N draws are 0..N-1.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from juryflow.judges.providers.families import family_of
from juryflow.maths.records import Item
from juryflow.standin.pairwise_sim import PAIR_PARAMS, SimPair, Verdict, pair_verdict

__all__ = [
    "Gold",
    "GoldEntry",
    "SimAnswer",
    "SimPair",
    "SimScore",
    "SimSpans",
    "load_gold",
    "parse_sim",
    "response_in",
    "sim_answer",
]

# The article ends where the seed's instructions resume, or at the end (data2txt_spans@v2).
_ARTICLE = re.compile(
    r"\*\*Generated Article:\*\*\n(.*?)(?:\n\n## Output Format Requirements|\n?\Z)", re.DOTALL
)
_ESCAPED_TAG = re.compile(r"&lt;(/?)([A-Za-z_][\w-]*)&gt;")
_PARAM = re.compile(r"([a-zA-Z])(\d+(?:\.\d*)?|\.\d+)")
_WORD = re.compile(r"\S+")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_EDGE = ".,;:!?\"'()[]"
_FALSE_SPAN_TRIES = 12
_MIN_FALSE_SPAN = 4
"""Shorter false spans are mostly single short words, which anchor ambiguously."""
_MILD_SHARE = 0.15
_FABRICATED_SHARE = 0.4
_FABRICATED_SPANS = 4
_DEFAULT_SPAN_LENGTH = 40


# --- the gold set --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GoldEntry:
    """One labelled response: half-open character spans into it and the response verdict."""

    spans: tuple[tuple[int, int], ...]
    hallucinated: bool
    writer: str | None = None
    """The model that wrote the response (the row's ``model`` column), if named."""


@dataclass(frozen=True, eq=False)
class Gold(Mapping[str, GoldEntry]):
    """Gold labels keyed by the exact response text, with the statistics sim judges need.

    Compares as the mapping it is (``eq=False`` keeps Mapping's equality).
    """

    entries: Mapping[str, GoldEntry]
    spans_per_item: float = field(init=False)
    span_lengths: tuple[int, ...] = field(init=False)
    median_lengths: tuple[float, float] = field(init=False)
    """Median response length of the clean and of the hallucinated responses (``L``)."""
    _by_length: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        lengths = tuple(end - start for e in self.entries.values() for start, end in e.spans)
        per_item = len(lengths) / len(self.entries) if self.entries else 0.0
        object.__setattr__(self, "entries", dict(self.entries))
        object.__setattr__(self, "spans_per_item", per_item)
        object.__setattr__(self, "span_lengths", lengths or (_DEFAULT_SPAN_LENGTH,))
        clean, hallucinated = (
            float(
                statistics.median(
                    [len(r) for r, e in self.entries.items() if e.hallucinated is v] or [0]
                )
            )
            for v in (False, True)
        )
        object.__setattr__(self, "median_lengths", (clean, hallucinated))
        # Longest first, so a response that contains another one is preferred over it.
        object.__setattr__(self, "_by_length", tuple(sorted(self.entries, key=len, reverse=True)))

    def __getitem__(self, response: str) -> GoldEntry:
        return self.entries[response]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, prompt: str) -> str | None:
        """The known response judged in ``prompt``, or None."""
        candidate = response_in(prompt)
        if candidate is not None:
            # Rendering escapes the slot's own tags inside a value; undo that to find it.
            for text in (candidate, _ESCAPED_TAG.sub(r"<\1\2>", candidate)):
                if text in self.entries:
                    return text
        # The slot could not be cut out (an edited template, a response that contains the
        # template's own markers): any known response quoted verbatim will do.
        return next((r for r in self._by_length if r and r in prompt), None)


def response_in(prompt: str) -> str | None:
    """The judged text of a rendered seed prompt: its article, or its ``<output>`` slot."""
    article = _ARTICLE.search(prompt)
    if article:
        return article.group(1)
    # Rendering neutralises <output> tags inside the output value, so the slot is the last
    # "<output>" line before the last closing tag (the input slot comes before it).
    close = prompt.rfind("\n</output>")
    open_ = prompt.rfind("<output>\n", 0, close) if close >= 0 else -1
    if open_ < 0:
        return None
    return prompt[open_ + len("<output>\n") : close]


def load_gold(path: str | Path, column: str = "response") -> Gold:
    """Gold labels of a JSONL, CSV or Parquet dataset with RAGTruth-style ``labels`` (and
    the writer of each response, from a ``model`` column when there is one).

    ``labels`` holds ``{"start", "end", ...}`` character offsets into ``column``;
    ``hallucinated`` is optional and defaults to "has a label". Rows whose response repeats
    an earlier one merge into it (spans united, verdicts or-ed); rows the dataset reader
    rejects (bad labels, a repeated id, an empty response) are skipped.
    Raises ``juryflow.storage.datasets.DatasetError`` (a ValueError) for an unreadable dataset.
    """
    from juryflow.storage.datasets import DatasetError, read_items

    merged: dict[str, GoldEntry] = {}
    for item in read_items(path, (column,)):
        if not isinstance(item, Item) or item.gold is None or item.gold.hallucinated is None:
            continue
        gold = item.gold
        response = item.text(column)
        spans = {(s, e) for s, e in gold.spans if 0 <= s < e <= len(response)}
        writer = item.metadata.get("model") or None
        if response in merged:
            earlier = merged[response]
            spans |= set(earlier.spans)
            hallucinated = earlier.hallucinated or gold.hallucinated
            writer = earlier.writer or writer
        else:
            hallucinated = gold.hallucinated
        merged[response] = GoldEntry(tuple(sorted(spans)), bool(hallucinated or spans), writer)
    if not merged:
        raise DatasetError(f"{path}: no row has gold labels ('labels' or 'hallucinated')")
    return Gold(merged)


# --- the model names -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimSpans:
    recall: float = 1.0
    false_share: float = 0.0
    jitter: float = 0.0
    near_miss: float = 0.0
    over_flag: float = 0.0
    broken: float = 0.0
    length_bias: float = 0.0
    flip: float = 0.0
    self_preference: float = 0.0
    family: str | None = None


@dataclass(frozen=True, slots=True)
class SimScore:
    sensitivity: float = 1.0
    specificity: float = 1.0
    mild: float = 0.0
    broken: float = 0.0
    length_bias: float = 0.0
    flip: float = 0.0
    self_preference: float = 0.0
    family: str | None = None


_SPANS_PARAMS = {
    "r": "recall",
    "f": "false_share",
    "j": "jitter",
    "n": "near_miss",
    "o": "over_flag",
    "b": "broken",
    "L": "length_bias",
    "F": "flip",
    "S": "self_preference",
}
_SCORE_PARAMS = {
    "s": "sensitivity",
    "p": "specificity",
    "m": "mild",
    "b": "broken",
    "L": "length_bias",
    "F": "flip",
    "S": "self_preference",
}


def parse_sim(answer: str) -> SimSpans | SimScore | SimPair:
    """``sim-spans-r0.8-f0.1`` and the like (see the module docs); raises ValueError."""
    body, at, own = answer.partition("@")
    kind, _, rest = body.removeprefix("sim-").partition("-")
    names = {"spans": _SPANS_PARAMS, "score": _SCORE_PARAMS, "pair": PAIR_PARAMS}.get(kind)
    if not answer.startswith("sim-") or names is None:
        raise ValueError(
            f"sim answer {answer!r}: expected sim-spans-..., sim-score-... or sim-pair-..."
        )
    values: dict[str, Any] = {}
    for part in rest.split("-") if rest else ():
        match = _PARAM.fullmatch(part)
        if not match or match.group(1) not in names:
            known = ", ".join(names)
            raise ValueError(f"sim answer {answer!r}: bad parameter {part!r} (known: {known})")
        name, value = names[match.group(1)], float(match.group(2))
        if name in values:
            raise ValueError(f"sim answer {answer!r}: {part[0]} given twice")
        if not 0.0 <= value <= 1.0 or (name == "false_share" and value >= 1.0):
            raise ValueError(f"sim answer {answer!r}: {part!r} is outside [0, 1]")
        values[name] = value
    if kind == "pair":
        # No pair parameter needs the judge's own family (there is no self-preference yet).
        if at:
            raise ValueError(f"sim answer {answer!r}: sim-pair takes no '@' family")
        return SimPair(**values)
    if (at or values.get("self_preference")) and not own.strip():
        raise ValueError(
            f"sim answer {answer!r}: S needs the judge's own family after '@' ({body}@meta)"
        )
    values["family"] = own.strip().lower() or None
    return SimSpans(**values) if kind == "spans" else SimScore(**values)


# --- answers -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimAnswer:
    """What a sim judge says: spans, a score, a pairwise verdict, or (``broken``) truncated
    output."""

    kind: Literal["spans", "score", "pair", "broken"]
    spans: tuple[str, ...] = ()
    score: float = 0.0
    verdict: Verdict | None = None
    """The ``pair`` verdict: "A" (the answer shown first is better), "B" or "tie"."""


def sim_answer(
    answer: str, prompt: str, gold: Gold | None, seed: int, model: str, draw: int = 0
) -> SimAnswer | None:
    """The sim judge ``answer``'s reply to ``prompt``; None when the response has no gold
    (a ``sim-pair`` judge answers a random verdict instead, so never None).

    ``draw`` numbers the samples of a sampled request (see the module's Sampling); 0 is the
    answer every unsampled request gets."""
    params = parse_sim(answer)
    if isinstance(params, SimPair):
        verdict = pair_verdict(params, prompt, gold, seed, model, draw)
        return SimAnswer("broken") if verdict is None else SimAnswer("pair", verdict=verdict)
    response = gold.find(prompt) if gold is not None else None
    if gold is None or response is None:
        return None
    suffix = f"|draw{draw}" if draw else ""
    digest = hashlib.sha256(f"{seed}|{model}|{response}{suffix}".encode()).digest()
    rng = random.Random(digest)
    if rng.random() < params.broken:
        return SimAnswer("broken")
    entry = gold[response]
    forced = _forced_verdict(params, entry, len(response), gold, rng)
    if forced is not None:
        return _forced_answer(params, forced, response, rng)
    if isinstance(params, SimScore):
        return SimAnswer("score", score=_sim_score(params, entry, response, rng))
    return SimAnswer("spans", spans=_sim_spans(params, entry, response, gold, rng))


def _forced_verdict(
    params: SimSpans | SimScore, entry: GoldEntry, length: int, gold: Gold, rng: random.Random
) -> bool | None:
    """The verdict a bias (``L``, ``F``, ``S``) imposes (the opposite of gold's), or None."""
    long = length > gold.median_lengths[entry.hallucinated]
    # Draw only for a bias the judge has, so judges without one answer as they always did.
    leans = long != entry.hallucinated
    if params.length_bias and leans and rng.random() < params.length_bias:
        return not entry.hallucinated
    if params.flip and rng.random() < params.flip:
        return not entry.hallucinated
    writer = family_of(entry.writer)
    if params.self_preference and writer is not None:
        # Easy on its own family's hallucinations, hard on the others' clean responses.
        own = writer == params.family
        if own == entry.hallucinated and rng.random() < params.self_preference:
            return not entry.hallucinated
    return None


def _forced_answer(
    params: SimSpans | SimScore, flag: bool, response: str, rng: random.Random
) -> SimAnswer:
    if isinstance(params, SimScore):
        return SimAnswer("score", score=0.6 if flag else 0.0)
    if not flag:
        return SimAnswer("spans")
    sentence = _sentence(response, [], rng) or _strip(response, 0, len(response))
    return SimAnswer("spans", spans=(response[sentence[0] : sentence[1]],))


def _sim_score(params: SimScore, entry: GoldEntry, response: str, rng: random.Random) -> float:
    if not entry.hallucinated:
        return 0.0 if rng.random() < params.specificity else rng.choice((0.3, 0.3, 0.6))
    if rng.random() >= params.sensitivity:
        return 0.0
    covered = sum(end - start for start, end in entry.spans) / max(1, len(response))
    if covered >= _FABRICATED_SHARE or len(entry.spans) >= _FABRICATED_SPANS:
        return 1.0
    mild = len(entry.spans) == 1 and covered < _MILD_SHARE
    return 0.3 if mild and rng.random() < params.mild else 0.6


def _sim_spans(
    params: SimSpans, entry: GoldEntry, response: str, gold: Gold, rng: random.Random
) -> tuple[str, ...]:
    words = [(m.start(), m.end()) for m in _WORD.finditer(response)]
    picked = [span for span in entry.spans if rng.random() < params.recall]
    taken = list(entry.spans)
    for _ in range(_poisson(rng, _false_rate(params, gold))):
        false = _false_span(response, words, taken, rng.choice(gold.span_lengths), rng)
        if false is not None:
            picked.append(false)
            taken.append(false)
    if not entry.hallucinated and rng.random() < params.over_flag:
        sentence = _sentence(response, taken, rng)
        if sentence is not None:
            picked.append(sentence)
    spans: list[tuple[int, str]] = []
    for start, end in sorted(picked):
        if rng.random() < params.jitter:
            start, end = _jitter(response, words, start, end, rng)
        text = response[start:end]
        if rng.random() < params.near_miss:
            text = _near_miss(text, rng)
        spans.append((start, text))
    return tuple(text for _, text in spans if text.strip())


def _false_rate(params: SimSpans, gold: Gold) -> float:
    """False spans per item that make them ``false_share`` of all spans returned."""
    kept = params.recall * gold.spans_per_item
    return kept * params.false_share / (1.0 - params.false_share)


def _poisson(rng: random.Random, mean: float) -> int:
    # Knuth's method: the means here are small (about one span per item).
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in spans)


def _false_span(
    response: str,
    words: list[tuple[int, int]],
    taken: list[tuple[int, int]],
    length: int,
    rng: random.Random,
) -> tuple[int, int] | None:
    """A run of words outside ``taken``, about ``length`` characters, found once in the text."""
    free = [i for i, (s, e) in enumerate(words) if not _overlaps(s, e, taken)]
    for _ in range(_FALSE_SPAN_TRIES if free else 0):
        first = last = rng.choice(free)
        while (
            words[last][1] - words[first][0] < length
            and last + 1 < len(words)
            and not _overlaps(words[last][0], words[last + 1][1], taken)
        ):
            last += 1
        start, end = _strip(response, words[first][0], words[last][1])
        text = response[start:end]
        # A false span must anchor where it was cut from, or it would land on (and be
        # scored as) some other place in the text.
        if end - start >= _MIN_FALSE_SPAN and response.count(text) == 1:
            return start, end
    return None


def _sentence(
    response: str, taken: list[tuple[int, int]], rng: random.Random
) -> tuple[int, int] | None:
    sentences = [
        _strip(response, m.start(), m.end())
        for m in _SENTENCE.finditer(response)
        if len(m.group().strip()) >= 20
    ]
    sentences = [
        (s, e)
        for s, e in sentences
        if not _overlaps(s, e, taken) and response.count(response[s:e]) == 1
    ]
    return rng.choice(sentences) if sentences else None


def _strip(response: str, start: int, end: int) -> tuple[int, int]:
    """Offsets without surrounding whitespace or edge punctuation (kept if nothing is left)."""
    text = response[start:end]
    inner = text.strip(_EDGE + " \t\r\n")
    if not inner:
        return start, end
    offset = text.find(inner)
    return start + offset, start + offset + len(inner)


def _jitter(
    response: str, words: list[tuple[int, int]], start: int, end: int, rng: random.Random
) -> tuple[int, int]:
    """One word more or less at one end, as judges disagree on where a claim starts."""
    at_end = rng.random() < 0.5
    inside = [(s, e) for s, e in words if start <= s and e <= end]
    if rng.random() < 0.5 and len(inside) >= 2:
        return (start, inside[-2][1]) if at_end else (inside[1][0], end)
    if at_end:
        following = [e for s, e in words if s >= end]
        return (start, following[0]) if following else (start, end)
    preceding = [s for s, e in words if e <= start]
    return (preceding[-1], end) if preceding else (start, end)


def _near_miss(text: str, rng: random.Random) -> str:
    """A copy an exact match misses but normalised anchoring finds (case, trailing period)."""
    recase = rng.choice((str.lower, str.upper, str.swapcase))
    changed = recase(text)
    if changed == text or rng.random() < 0.5:
        changed += "."
    return changed
