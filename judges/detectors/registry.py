"""Name → detector. The offline judges of a panel are looked up here by their `detector` key."""

from __future__ import annotations

from typing import Protocol

from juryflow.maths.names import did_you_mean


class Detector(Protocol):
    """Finds unsupported spans of ``response`` given ``reference``; returns character offsets."""

    name: str

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]: ...


def _registry() -> dict[str, Detector]:
    from juryflow.judges.detectors.content import ContentWordsDetector
    from juryflow.judges.detectors.facts import FactsDetector
    from juryflow.judges.detectors.grounding import GroundingDetector
    from juryflow.judges.detectors.names import NamesDetector
    from juryflow.judges.detectors.numbers import NumbersDetector
    from juryflow.judges.detectors.polarity import PolarityDetector

    detectors: list[Detector] = [
        # Data-to-text (a structured record as reference).
        NumbersDetector(),
        NamesDetector(),
        ContentWordsDetector(),
        # Free text (passages for question answering, an article to summarise).
        GroundingDetector(),
        # A clause is a second, finer check, so the sentence that holds it may be less
        # unsupported than a sentence flagged whole.
        GroundingDetector("grounding-clauses", clauses=True, min_fraction=0.4),
        FactsDetector(),
        PolarityDetector(),
    ]
    return {d.name: d for d in detectors}


def detector_names() -> list[str]:
    return sorted(_registry())


def get_detector(name: str) -> Detector:
    registry = _registry()
    if name not in registry:
        raise KeyError(
            f"unknown detector {name!r}{did_you_mean(name, registry)}; "
            f"known detectors: {', '.join(sorted(registry))}"
        )
    return registry[name]
