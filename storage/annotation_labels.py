"""Which view holds the human labels of each gold source (``--gold``).

The views themselves are in :mod:`juryflow.storage.views`: ``gold_labels`` (the dataset's
labels), ``annotation_labels`` (each item's newest annotation) and ``adjudicated_labels``
(the annotation where there is one, else the dataset's label), all with the same columns,
and ``judge_accuracy`` with its two twins against the other sources. Code picks a view name
from these dicts only, never from user text.
"""

from __future__ import annotations

from juryflow.maths.names import did_you_mean
from juryflow.storage.annotations import GOLD_SOURCES, GoldSource
from juryflow.storage.connection import StoreError

LABEL_VIEWS: dict[GoldSource, str] = {
    "dataset": "gold_labels",
    "annotations": "annotation_labels",
    "both": "adjudicated_labels",
}
"""The labels view of each gold source."""

ACCURACY_VIEWS: dict[GoldSource, str] = {
    "dataset": "judge_accuracy",
    "annotations": "judge_accuracy_annotations",
    "both": "judge_accuracy_adjudicated",
}
"""``judge_accuracy`` against each gold source."""


def labels_view(gold: GoldSource) -> str:
    """The view holding the labels of gold source ``gold``; StoreError for another value."""
    try:
        return LABEL_VIEWS[gold]
    except KeyError:
        raise StoreError(
            f"unknown gold source {gold!r}{did_you_mean(gold, GOLD_SOURCES)}: "
            f"use one of {', '.join(GOLD_SOURCES)}"
        ) from None


def accuracy_view(gold: GoldSource) -> str:
    """The ``judge_accuracy`` view against gold source ``gold``."""
    labels_view(gold)
    return ACCURACY_VIEWS[gold]
