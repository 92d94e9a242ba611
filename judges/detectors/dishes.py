"""Dish names in lower case: the items of a menu list ("the menu includes tacos, burritos
and quesadillas", "dishes such as pasta and seafood") that the reference never names.

Capitalised dishes ("Carne Asada Burrito") are names like any other; written in lower case
they escape a names check, yet an invented dish is the same claim. Only lists that a menu
word introduces are read, so that "offers free Wi-Fi and outdoor seating" (the record's
attributes, the content detector's job) is left alone. In an item, the words that say
what kind of dish it is count ("escargots", "artisanal cheeses"); the words that say how
it is liked or made ("delicious", "homemade") and menu words ("dishes", "options") do not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from juryflow.judges.detectors.text import STOPWORDS, stem, words, wordset

_HEAD = (
    r"(?:dish(?:es)?|options?|items?|foods?|fare|specialt(?:y|ies)|favou?rites?|offerings?"
    r"|choices?|delights|treats|goods|selections?|bites|plates|entrees|meals?)"
)
"""Menu words a list of dishes follows: "dishes such as", "options including"."""
_INTRO = r"(?:such\s+as|like|including|includ(?:e|es)|ranging\s+from)"
_CUE = re.compile(
    rf"""
    \bmenu\s+(?:also\s+)?(?:features|includes|offers|consists\s+of|boasts|highlights
        |items\s+(?:such\s+as|like|include|including))\s+
      (?:an?\s+(?:wide\s+|large\s+|diverse\s+)?(?:variety|range|selection|mix|array)\s+of\s+
        (?:[a-z-]+\s+){{0,2}}?{_HEAD}\s*,?\s*{_INTRO}?\s*)?
  | \b{_HEAD}\s*,?\s+{_INTRO}\s+
    """,
    re.IGNORECASE | re.VERBOSE,
)
_LIST_END = re.compile(
    r"[.;:!?()\n]"
    r"|\s(?:with|for|that|which|at|in|on|to|while|but|who|where|making|all|among|is|are|was"
    r"|were|has|have|had|can|will|may|provides?|offers?|serves?|makes?|catering)\s"
    r"|,\s+(?:and\s+)?(?:the|it|they|there|its|their|this|which|making|all|as\s+a)\b",
    re.IGNORECASE,
)
"""Where a list of dishes stops: the end of its clause, or a verb of its own."""
_ITEM_BREAK = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or|&|plus)\s+|\s+as\s+well\s+as\s+")

_NOT_A_KIND = frozenset(
    stem(w)
    for w in wordset(
        """
    dish dishes option options item items food foods fare specialty specialties favorite
    favorites offering offerings choice choices selection selections cuisine cuisines menu meal
    meals drink drinks beverage beverages service services amenity amenities experience
    atmosphere variety range more other others style inspired kind kinds type types various
    classic traditional authentic homemade signature famous popular unique fresh freshly tasty
    delicious flavorful savory house special specials great good excellent amazing wonderful
    best favorite perfect generous hearty wide large small big diverse extensive full new own
    their its local daily made served breakfast brunch lunch dinner like including such
    """
    )
)
"""Words of an item that do not say which dish it is: menu words, praise, meal times."""


def dish_spans(response: str, knows: Callable[[str], bool]) -> Iterator[tuple[int, int]]:
    """Spans of list items naming a dish with a word ``knows`` rejects: from the first such
    word of the item to its last ("artisanal cheeses")."""
    for cue in _CUE.finditer(response):
        stop = _LIST_END.search(response, cue.end())
        end = stop.start() if stop else len(response)
        for start, stop_at in _items(response, cue.end(), end):
            unknown = [
                (start + s, start + e)
                for w, s, e in words(response[start:stop_at])
                if len(w) > 2
                and w.lower() not in STOPWORDS
                and stem(w) not in _NOT_A_KIND
                and not knows(w)
            ]
            if unknown:
                yield unknown[0][0], unknown[-1][1]


def _items(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    position = start
    for m in _ITEM_BREAK.finditer(text, start, end):
        yield position, m.start()
        position = m.end()
    yield position, end
