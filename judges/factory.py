"""Turn a panel's judge specs into judges, and check their keys before anything is called."""

from __future__ import annotations

from collections.abc import Mapping

from juryflow.judges.base import Judge
from juryflow.judges.keys import resolve_api_key
from juryflow.judges.panel import RECORDED_REFUSAL, JudgeSpec, PanelSpec
from juryflow.judges.providers.base import ModelClient
from juryflow.judges.providers.price import Price
from juryflow.judges.providers.registry import registered_provider


def build_client(spec: JudgeSpec) -> ModelClient:
    """The provider client of an LLM judge; raises MissingKeyError when its key is unset."""
    api_key = resolve_api_key(spec)
    if api_key is None:
        raise ValueError(f"judge {spec.id!r}: provider {spec.provider} has no model client")
    make_client = registered_provider(spec.provider).client
    return make_client(api_key, base_url=spec.base_url, timeout=spec.timeout, headers=spec.headers)


def build_judge(spec: JudgeSpec, prices: Mapping[str, Price] | None = None) -> Judge:
    if spec.provider == "recorded":
        raise ValueError(f"judge {spec.id!r}: {RECORDED_REFUSAL}")
    if spec.provider == "offline":
        from juryflow.judges.detectors.registry import get_detector
        from juryflow.judges.offline import OfflineJudge

        assert spec.detector is not None  # JudgeSpec's validator guarantees it
        return OfflineJudge(spec.id, get_detector(spec.detector))

    from juryflow.judges.llm_judge import LLMJudge

    judge_class = LLMJudge
    template = spec.template()
    if template.output_kind == "preference":
        from juryflow.judges.sampling.pairwise_judge import PairwiseJudge

        judge_class = PairwiseJudge
    elif spec.samples > 1:
        from juryflow.judges.sampling.sampled_judge import SampledJudge

        judge_class = SampledJudge
    # A prompt file's text travels in the spec: a remote worker needs no copy of the file.
    return judge_class(spec, build_client(spec), template, prices)


def check_keys(panel: PanelSpec) -> None:
    """Raise MissingKeyError for the first judge whose key is unavailable, before any call
    (ValueError for a recorded judge, which nothing can call)."""
    for spec in panel.judges:
        if spec.provider == "recorded":
            raise ValueError(f"judge {spec.id!r}: {RECORDED_REFUSAL}")
        resolve_api_key(spec)
