"""Bias probes of one run's judges against the human labels (``juryflow agreement --bias``).

Per judge, each probe a measured effect with its interval (:mod:`juryflow.maths.bias`):

- ``length``: how much more often the judge flags responses longer than their gold
  stratum's median length than shorter ones, at equal gold (Mantel–Haenszel difference
  of flag rates; 0: length does not sway it);
- ``self-preference``: how much more often it flags responses written by its own model
  family (:mod:`juryflow.judges.providers.families`, or the panel's ``family:``) than
  others', at equal gold (negative: it goes easy on its own family);
- ``position`` (span judges, with span labels): the mean relative position of the
  characters it flags minus that of the gold characters, in shares of the text
  (positive: it flags later in the text than the humans did).

Intervals resample whole sources (the item column ``group``, ``source_id`` or ``source``);
without gold labels the rate differences are measured over all items and say they are not
controlled for gold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from juryflow.judges.providers.families import family_of, judge_family
from juryflow.maths.bias import (
    NO_GOLD,
    Effect,
    gold_strata,
    long_responses,
    position_shift,
    rate_difference,
)
from juryflow.storage.annotations import GoldSource
from juryflow.storage.reads.analysis import RunData, audit_mask, load_run_data
from juryflow.storage.reads.bias_inputs import BiasInputs, bias_inputs
from juryflow.storage.store import Store

ProbeName = Literal["length", "self-preference", "position"]
_NAN = float("nan")


@dataclass(frozen=True, slots=True)
class BiasProbe:
    judge_id: str
    probe: ProbeName
    effect: Effect
    note: str
    """What the figure is, or why there is none."""


@dataclass(frozen=True, slots=True)
class BiasReport:
    run_id: str
    panel_name: str
    gold_source: str
    n_items: int
    controlled: bool
    """The rate differences are measured at equal gold (some item has a human verdict)."""
    group_column: str | None
    """The item column the intervals resample by; None: each item is its own source."""
    probes: tuple[BiasProbe, ...]
    audit_items: int | None = None
    """An early-stopped run: the probes are over its audit sample of this many items (a
    judge left out of decided items would be measured on the hard ones only)."""


def _missing(judge_id: str, probe: ProbeName, note: str) -> BiasProbe:
    return BiasProbe(judge_id, probe, Effect(_NAN, _NAN, _NAN, 0), note)


def _length(
    data: RunData, j: int, strata: np.ndarray, long: np.ndarray, groups: list[str]
) -> BiasProbe:
    judge_id = data.judge_ids[j]
    effect = rate_difference(data.verdicts[j], long, strata, groups)
    if not effect.measured:
        return _missing(judge_id, "length", "no verdict on both long and short responses")
    at = "at equal gold" if (strata != NO_GOLD).any() else "no gold: not controlled"
    return BiasProbe(judge_id, "length", effect, f"flag rate long - short responses, {at}")


def _self_preference(
    data: RunData, j: int, strata: np.ndarray, inputs: BiasInputs, writer_families: list[str | None]
) -> BiasProbe:
    judge_id = data.judge_ids[j]
    spec = inputs.judges.get(judge_id)
    family = judge_family(spec.provider, spec.model, spec.family) if spec else None
    if spec is not None and spec.provider == "offline":
        return _missing(judge_id, "self-preference", "an offline detector: no model family")
    if family is None:
        return _missing(
            judge_id, "self-preference", "judge's model family unknown: set family: in the panel"
        )
    if not any(inputs.writers):
        return _missing(
            judge_id, "self-preference", "items do not name their writer (no model column)"
        )
    known = np.asarray([f is not None for f in writer_families])
    own = np.asarray([f == family for f in writer_families])
    if not own.any():
        return _missing(judge_id, "self-preference", f"no response written by family {family}")
    verdicts = np.where(known, data.verdicts[j], np.nan)
    effect = rate_difference(verdicts, own, strata, inputs.groups)
    if not effect.measured:
        return _missing(judge_id, "self-preference", f"family {family}: no comparable responses")
    note = f"flag rate own ({family}, {int(own.sum())} responses) - others, at equal gold"
    if not (strata != NO_GOLD).any():
        note = note.replace("at equal gold", "no gold: not controlled")
    return BiasProbe(judge_id, "self-preference", effect, note)


def _position(data: RunData, j: int, inputs: BiasInputs) -> BiasProbe:
    judge_id = data.judge_ids[j]
    effect = position_shift(data.span_sets[j], data.gold_span_set, inputs.lengths, inputs.groups)
    if not effect.measured:
        return _missing(judge_id, "position", "no item where both it and gold flag a span")
    return BiasProbe(
        judge_id, "position", effect, "flagged - gold characters' mean position (0 start, 1 end)"
    )


def bias_report(
    store: Store, run_id: str | None = None, gold: GoldSource = "dataset"
) -> BiasReport:
    """The bias probes of every judge of a run (the latest when ``run_id`` is None)."""
    data = load_run_data(store, run_id, gold)
    inputs = bias_inputs(store, data.info.run_id)
    audit = audit_mask(store, data)
    if audit is not None:
        data = data.restricted(audit)
        kept = audit.tolist()
        inputs = replace(
            inputs,
            lengths=[v for v, k in zip(inputs.lengths, kept, strict=True) if k],
            groups=[v for v, k in zip(inputs.groups, kept, strict=True) if k],
            writers=[v for v, k in zip(inputs.writers, kept, strict=True) if k],
        )
    strata = gold_strata(data.gold_hallucinated)
    controlled = bool((strata != NO_GOLD).any())
    # Long or short within the item's gold stratum, over every item of the run.
    long = long_responses(inputs.lengths, strata)
    writer_families = [family_of(w) for w in inputs.writers]
    probes: list[BiasProbe] = []
    for j, judge_id in enumerate(data.judge_ids):
        probes.append(_length(data, j, strata, long, inputs.groups))
        probes.append(_self_preference(data, j, strata, inputs, writer_families))
        if data.output_kinds.get(judge_id) == "spans" and data.has_gold_spans:
            probes.append(_position(data, j, inputs))
    return BiasReport(
        run_id=data.info.run_id,
        panel_name=data.info.panel_name,
        gold_source=gold,
        n_items=len(data.item_ids),
        controlled=controlled,
        group_column=inputs.group_column,
        probes=tuple(probes),
        audit_items=None if audit is None else int(audit.sum()),
    )
