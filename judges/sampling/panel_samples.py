"""What a panel file says about samples: the panel's default spread over its LLM judges,
the combinations refused, and the one warning (samples of a deterministic call)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from juryflow.judges.providers.registry import provider_names, registered_provider
from juryflow.maths.records import OutputKind
from juryflow.maths.samples.reducers import SampleReducerError, resolve_sample_reducer


class _Judge(Protocol):
    """What these checks read of a judge (``judges.panel.JudgeSpec``), named here so that
    the panel, which calls them, is not imported back."""

    @property
    def id(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def samples(self) -> int: ...
    @property
    def temperature(self) -> float: ...
    @property
    def sample_reducer(self) -> str | None: ...
    @property
    def output_kind(self) -> OutputKind: ...


class PanelSpec(Protocol):
    """What these checks read of a panel (``judges.panel.PanelSpec``)."""

    @property
    def judges(self) -> Sequence[_Judge]: ...


def spread_panel_samples(data: Any) -> Any:
    """The panel's ``samples`` given to each LLM judge that sets none (offline detectors
    are deterministic and keep one)."""
    if not isinstance(data, dict) or data.get("samples") is None:
        return data
    judges = data.get("judges")
    if not isinstance(judges, list | tuple):
        return data
    spread = [
        {**judge, "samples": data["samples"]}
        if isinstance(judge, dict) and judge.get("provider") != "offline" and "samples" not in judge
        else judge
        for judge in judges
    ]
    return {**data, "judges": spread}


def check_sampling(panel: PanelSpec) -> None:
    """Raise ValueError (one line, naming the fix) for a sample reducer that does not fit
    its judge."""
    from juryflow.prompts.loader import PromptError

    for spec in panel.judges:
        if spec.sample_reducer is not None and spec.provider != "offline":
            try:
                kind = spec.output_kind
            except PromptError:
                continue  # the panel's prompt check names it
            try:
                resolve_sample_reducer(spec.sample_reducer, kind)
            except SampleReducerError as error:
                raise ValueError(f"judge {spec.id!r}: {error}") from None


def sampling_warnings(panel: PanelSpec) -> list[str]:
    """One line naming the judges whose samples would be copies: asked at temperature 0.

    Only judges whose provider passes a temperature on (the Anthropic API version the SDK
    sends takes none, and samples at its own)."""
    cold = [
        f"{spec.id} (samples: {spec.samples})"
        for spec in panel.judges
        if spec.samples > 1
        and not _pairwise(spec)
        and spec.temperature == 0
        and spec.provider in provider_names()
        and registered_provider(spec.provider).takes_temperature
    ]
    if not cold:
        return []
    return [
        f"judge {', '.join(cold)} at temperature 0: a deterministic model's samples are copies "
        "of one answer; set 'temperature' (e.g. 0.7) on the judge to sample its noise"
    ]


def _pairwise(spec: _Judge) -> bool:
    """A pairwise judge: its two samples are the two orders, different prompts."""
    from juryflow.prompts.loader import PromptError

    try:
        return spec.output_kind == "preference"
    except PromptError:
        return False


def pairwise_mix(panel: PanelSpec) -> str | None:
    """Why a panel mixing pairwise judges with others cannot run (their answers are of
    different things: a preference between two answers, a grade of one), or None."""
    pairwise = [spec.id for spec in panel.judges if _pairwise(spec)]
    if not pairwise or len(pairwise) == len(panel.judges):
        return None
    others = [spec.id for spec in panel.judges if spec.id not in pairwise]
    return (
        f"judges {', '.join(pairwise)} compare two answers but {', '.join(others)} grade "
        "one: a panel is all pairwise or none; put them in two panel files"
    )
