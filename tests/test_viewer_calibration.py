"""The run page's "Calibrations" section, through the viewer's real Starlette app (its
security middleware bound to loopback names): what `juryflow calibrate` stored for a run is
shown as stored, with the CLI's digits; an older report without what each judge adds, the
cheapest subset or stacking still renders; a run without one says how to make one; judge
names from the data render as text.

The run is written by `juryflow import` (no Prefect, no model); the calibrations are stored
records, so the figures are chosen here and nothing is fitted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

import juryflow
from juryflow.storage.store import CalibrationRecord, Store
from juryflow.viewer.app import create_app
from juryflow.viewer.calibration_model import delta, subset_line
from juryflow.viewer.run_model import rule_text
from juryflow.viewer.security import LOOPBACK_HOSTS
from juryflow.viewer.state import ViewerState

HOSTILE = "<b>x</b>"
ESCAPED = "&lt;b&gt;x&lt;/b&gt;"


def _prf(p: float, r: float, f1: float, lo: float, hi: float) -> dict[str, Any]:
    return {"precision": p, "recall": r, "f1": f1, "f1_interval": [lo, hi]}


PREDICTORS: list[dict[str, Any]] = [
    {"name": "calibrated (out of fold)", "kind": "calibrated", "coverage": 1.0,
     "response": _prf(0.5, 0.6667, 0.5714, 0.402, 0.713), "spans": None},
    {"name": "default rule", "kind": "default", "coverage": 0.98,
     "response": _prf(0.4, 0.5, 0.4444, 0.301, 0.588), "spans": None},
    {"name": "best judge chosen in fold", "kind": "best", "coverage": None,
     "response": _prf(0.45, 0.55, 0.495, 0.35, 0.64), "spans": None},
    {"name": "alpha", "kind": "judge", "coverage": 1.0,
     "response": _prf(0.42, 0.5, 0.4565, 0.31, 0.6), "spans": None},
    {"name": HOSTILE, "kind": "judge", "coverage": 0.5,
     "response": _prf(0.3, 0.4, 0.3429, 0.2, 0.5), "spans": None},
]  # fmt: skip

OLD_REPORT: dict[str, Any] = {
    "rule": "score median · spans majority · verdict weighted · weights alpha=2, <b>x</b>=0.5",
    "folds": 5,
    "items": 30,
    "groups": 30,
    "group_column": None,
    "fold_rules": [],
    "notes": ["fewer than 50 labelled items: the intervals are wide"],
    "predictors": PREDICTORS,
    "differences": [
        {
            "versus": "default rule",
            "response": 0.127,
            "response_interval": [-0.02, 0.25],
            "spans": None,
            "span_interval": None,
        },
    ],
}
"""As an older juryflow stored it: no judges_added, subsets, fold choices, gold source."""

SUBSETS: dict[str, Any] = {
    "cost_unit": "USD",
    "best_f1": 0.4123,
    "by_size": [
        {
            "size": 1,
            "judges": ["alpha"],
            "response_f1": 0.3561,
            "cost": 0.0011,
            "within_noise": False,
        },
        {
            "size": 2,
            "judges": ["alpha", HOSTILE],
            "response_f1": 0.4012,
            "cost": 0.0031,
            "within_noise": True,
        },
    ],
}
SUBSETS["cheapest"] = SUBSETS["by_size"][1]

NEW_REPORT: dict[str, Any] = {
    **OLD_REPORT,
    "gold_source": "dataset",
    "interval_level": 0.95,
    "rule": "score median · spans majority · verdict stacked · stacked on verdicts: "
    "intercept -0.50, alpha=1.23, <b>x</b>=-0.40",
    "fold_choices": ["stacked", "stacked", "stacked", "majority", "stacked"],
    "choice_on_all_items": "stacked",
    "kept_default": False,
    "notes": [],
    "judges_added": [
        {
            "judge": "alpha",
            "response": 0.021,
            "response_interval": [-0.01, 0.05],
            "spans": None,
            "span_interval": None,
        },
        {
            "judge": HOSTILE,
            "response": 0.056,
            "response_interval": [0.012, 0.098],
            "spans": -0.013,
            "span_interval": [-0.04, 0.011],
        },
    ],
    "subsets": SUBSETS,
}

STACKED_RULE = {
    "score": "median",
    "spans": "majority",
    "verdict": "stacked",
    "stack": {
        "intercept": -0.5,
        "coefficients": {"alpha": 1.234, HOSTILE: -0.4},
        "features": "verdicts",
    },
    "name": "stacked",
}
WEIGHTED_RULE = {
    "score": "median",
    "spans": "majority",
    "verdict": "weighted",
    "weights": {"alpha": 2.0, HOSTILE: 0.5},
    "name": "older",
}


@dataclass(frozen=True)
class Stored:
    store: Store
    run_id: str
    """Calibrated three times: ``broken`` (a report that cannot be read), ``older`` (an
    old-style report), then ``stacked``."""
    bare_run_id: str
    """Never calibrated."""


def _import(folder: Path, name: str, db: Path) -> str:
    rows = [
        {
            "id": f"item-{k}",
            "response": f"answer {k}",
            "judges": {"alpha": k % 2 == 0, HOSTILE: k % 3 == 0},
            "label": k % 2 == 0,
        }
        for k in range(6)
    ]
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = juryflow.import_judgments(path, db=db, judges_map="judges", label_column="label")
    return run.run_id


def _record(name: str, run_id: str, rule: dict[str, Any], report: Any, hour: int) -> Any:
    return CalibrationRecord(
        name=name,
        created_at=datetime(2026, 1, 2, hour, 0, tzinfo=UTC),
        run_id=run_id,
        rule=rule,
        folds=5,
        group_column=None,
        seed=0,
        report=report,
    )


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    folder = tmp_path_factory.mktemp("viewer-calibration")
    db = folder / "store.duckdb"
    run_id, bare = _import(folder, "calibrated", db), _import(folder, "bare", db)
    store = Store(db)
    store.save_calibration(_record("broken", run_id, WEIGHTED_RULE, {"predictors": [{}]}, 8))
    store.save_calibration(_record("older", run_id, WEIGHTED_RULE, OLD_REPORT, hour=9))
    store.save_calibration(_record("stacked", run_id, STACKED_RULE, NEW_REPORT, hour=10))
    return Stored(store, run_id, bare)


@dataclass(frozen=True)
class Page:
    html: str
    parsed: _Calibrations


@pytest.fixture(scope="module")
def pages(stored: Stored) -> dict[str, Page]:
    """Each run's page, fetched once (a run page takes a second or two to gather)."""
    state = ViewerState(stored.store, "tester", allowed_hosts=LOOPBACK_HOSTS)
    out = {}
    with TestClient(create_app(state), base_url="http://127.0.0.1") as client:
        for run_id in (stored.run_id, stored.bare_run_id):
            response = client.get(f"/runs/{quote(run_id, safe='')}")
            assert response.status_code == 200, response.text
            assert "default-src 'none'" in response.headers["content-security-policy"]
            parsed = _Calibrations()
            parsed.feed(response.text)
            assert parsed.found, "no Calibrations section"
            out[run_id] = Page(response.text, parsed)
    return out


class _Calibrations(HTMLParser):
    """Within ``section#calibrations``: each calibration's tables (by class) as rows of
    cell texts, and its paragraphs' texts."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.found = False
        self.current: dict[str, Any] | None = None
        self.calibrations: list[dict[str, Any]] = []
        self.texts: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._para: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("id") == "calibrations":
            self.inside = self.found = True
        if not self.inside:
            return
        if tag == "div" and "calibration" in (a.get("class") or "").split():
            self.current = {"tables": {}, "paragraphs": []}
            self.calibrations.append(self.current)
        elif tag == "table" and self.current is not None:
            self._table = (a.get("class") or "table").split()[-1]
            self.current["tables"][self._table] = []
        elif tag == "tr" and self._table is not None and self.current is not None:
            self.current["tables"][self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "p":
            self._para = []

    def handle_endtag(self, tag: str) -> None:
        if not self.inside:
            return
        if tag == "section":
            self.inside = False
        elif tag in ("td", "th") and self._cell is not None and self.current is not None:
            assert self._table is not None
            self.current["tables"][self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "p" and self._para is not None:
            text = " ".join("".join(self._para).split())
            self.texts.append(text)
            if self.current is not None:
                self.current["paragraphs"].append(text)
            self._para = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._para is not None:
            self._para.append(data)


def test_the_run_page_shows_its_calibrations_newest_first(
    pages: dict[str, Page], stored: Stored
) -> None:
    html, page = pages[stored.run_id].html, pages[stored.run_id].parsed
    assert "<h2>Calibrations</h2>" in html
    assert [c["paragraphs"][0] for c in page.calibrations[:2]] == [
        f"stored rule: {NEW_REPORT['rule']}",
        f"stored rule: {OLD_REPORT['rule']}",
    ]
    new = page.calibrations[0]["tables"]
    # the out-of-fold table: the CLI's digits (F1 .3f, intervals .2f, coverage as %)
    assert new["calibration-predictors"][1:3] == [
        ["calibrated (out of fold)", "100 %", "0.500", "0.667", "0.571", "0.40–0.71",
         "—", "—", "—", "—"],
        ["default rule", "98 %", "0.400", "0.500", "0.444", "0.30–0.59", "—", "—", "—", "—"],
    ]  # fmt: skip
    assert [r[0] for r in new["calibration-predictors"][1:]] == [p["name"] for p in PREDICTORS]
    # the stacking coefficients, as the stored rule's text prints them
    assert new["calibration-weights"] == [
        ["judge", "stacking coefficient (verdicts)"],
        ["alpha", "1.23"],
        [HOSTILE, "-0.40"],
    ]
    assert "stacked on verdicts: intercept -0.50" in " ".join(page.texts)
    # what each judge adds, largest first, with the CLI's points
    assert new["calibration-judges-added"][1:] == [
        [HOSTILE, "+5.6 points (+1.2 to +9.8)", "-1.3 points (-4.0 to +1.1)"],
        ["alpha", "+2.1 points (-1.0 to +5.0)", "—"],
    ]
    line = (
        "cheapest subset within noise of the best (F1 0.412): the majority of alpha, "
        f"{HOSTILE} — F1 0.401 out of fold, $0.0031 an item"
    )
    assert line in page.calibrations[0]["paragraphs"]
    assert new["calibration-subsets"][1:] == [
        ["1", "alpha", "0.356", "0.0011", "no"],
        ["2", f"alpha, {HOSTILE}", "0.401", "0.0031", "yes"],
    ]
    facts = {row[0]: row[1] for row in new["calibration-facts"]}
    assert facts["each fold chose"] == "stacked | stacked | stacked | majority | stacked"
    assert facts["kept"].startswith("the procedure's choice")
    assert "calibrated − default rule: response F1 +12.7 points (-2.0 to +25.0); span F1 —" in html


def test_an_older_report_without_the_new_keys_still_renders(
    pages: dict[str, Page], stored: Stored
) -> None:
    html, page = pages[stored.run_id].html, pages[stored.run_id].parsed
    old = page.calibrations[1]
    assert "calibration-judges-added" not in old["tables"]
    assert "calibration-subsets" not in old["tables"]
    assert not any(p.startswith("cheapest subset") for p in old["paragraphs"])
    assert len(old["tables"]["calibration-predictors"]) == 1 + len(PREDICTORS)
    # no stack: the stored rule's weights are the judges' weights
    assert old["tables"]["calibration-weights"] == [
        ["judge", "weight"],
        ["alpha", "2"],
        [HOSTILE, "0.5"],
    ]
    # its notes (the newer report has none)
    assert html.count("<li>fewer than 50 labelled items: the intervals are wide</li>") == 1


def test_judge_names_render_as_text(pages: dict[str, Page], stored: Stored) -> None:
    html = pages[stored.run_id].html
    assert HOSTILE not in html
    section = html[html.index('<section id="calibrations">') :]
    section = section[: section.index("</section>")]
    assert f'<td>{ESCAPED}</td><td class="num">-0.40</td>' in section
    assert f'<td>{ESCAPED}</td><td class="num">+5.6 points (+1.2 to +9.8)</td>' in section
    assert f"the majority of alpha, {ESCAPED} — F1 0.401" in section


def test_a_run_without_calibration_says_how_to_make_one(
    pages: dict[str, Page], stored: Stored
) -> None:
    page = pages[stored.bare_run_id].parsed
    assert page.calibrations == []
    (hint,) = [t for t in page.texts if t.startswith("This run has no calibration")]
    assert f"juryflow calibrate {stored.bare_run_id} --db {stored.store.path}" in hint


def test_calibrations_of_reads_one_runs_newest_first(stored: Stored) -> None:
    names = [r.name for r in stored.store.calibrations_of(stored.run_id)]
    assert names == ["stacked", "older", "broken"]
    assert stored.store.calibrations_of(stored.bare_run_id) == []
    record = stored.store.calibrations_of(stored.run_id)[0]
    assert record.rule == STACKED_RULE and record.report == NEW_REPORT


def test_an_unreadable_report_is_one_line(pages: dict[str, Page], stored: Stored) -> None:
    page = pages[stored.run_id].parsed
    assert len(page.calibrations) == 3
    broken = page.calibrations[2]
    assert broken["tables"] == {}
    assert broken["paragraphs"][0] == f"stored rule: {rule_text(WEIGHTED_RULE)}"
    (line,) = broken["paragraphs"][1:]
    assert line.startswith("its stored report cannot be read (KeyError: 'name'); calibrate")
    assert f"juryflow calibrate {stored.run_id} --name broken" in line


def test_the_page_shows_the_digits_the_cli_prints() -> None:
    from juryflow.cli.calibration import _delta, _subset_line

    for value, interval in ((0.056, [0.012, 0.098]), (-0.00049, [-0.031, 0.0004]), (None, None)):
        assert delta(value, interval) == _delta(value, interval)
    assert subset_line(SUBSETS) == _subset_line(SUBSETS)
    calls = {**SUBSETS, "cost_unit": "calls", "cheapest": {**SUBSETS["cheapest"], "cost": 2.0}}
    assert subset_line(calls) == _subset_line(calls)
    assert subset_line({"cheapest": None}) == _subset_line({"cheapest": None})
