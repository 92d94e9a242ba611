"""`juryflow view`'s items and item pages and the adjudication POST, over real HTTP against a
store made by a real offline run (plus a run written as runs write, with unscored judges,
insufficient quorum and gold labels): paging, every sort and filter checked against SQL on
the views, search, prev/next keeping the filter, one-line 400s, hostile text as text, and
annotations stored and shown."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import duckdb
import httpx
import pytest

import juryflow
from juryflow.pages.reference_text import reference_text
from juryflow.storage.annotations import latest_annotation
from juryflow.storage.reads.item_queries import item_measures
from juryflow.storage.store import Store
from juryflow.viewer.server import RunningViewer, start_in_thread
from juryflow.viewer.state import ViewerState
from tests.conftest import REPO, SAMPLE

sys.path.insert(0, str(REPO / "bench"))
import bench_viewer

SCRIPT = '<script>alert("x")</script>'
IMG = '"><img src=x onerror=alert(1)>'
REVIEWER = "tester"


@dataclass(frozen=True)
class Stores:
    db: Path
    sample: str
    """A real offline run of the bundled sample plus two hostile rows."""
    synthetic: str
    """The bench's run (300 items): unscored judges, insufficient quorum, gold labels."""
    done: Path
    """A store with a 2-item run, for the empty queue."""


def _dataset(path: Path) -> Path:
    rows = [json.loads(line) for line in SAMPLE.read_text("utf-8").splitlines() if line]
    base = rows[0]
    hostile = [
        {**base, "id": "hostile-script", "response": f"Hi {SCRIPT} 100% a_b. Benchmark"},
        {**base, "id": "hostile-img", "response": f"Benchmark Eatery{IMG} &amp; café"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, *hostile]), "utf-8")
    return path


@pytest.fixture(scope="module")
def stores(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Stores:
    folder = tmp_path_factory.mktemp("viewer-items")
    db = folder / "evals.duckdb"
    sample = juryflow.run(_dataset(folder / "data.jsonl"), db=db, progress=False).run_id
    bench_viewer.build_store(db, items=300, judges=3, batch=100, seed=3)
    done = folder / "done.duckdb"
    bench_viewer.build_store(done, items=2, judges=3, batch=2, seed=1)
    return Stores(db, sample, bench_viewer.RUN_ID, done)


@pytest.fixture(scope="module")
def viewer(stores: Stores) -> Iterator[RunningViewer]:
    running = start_in_thread(ViewerState(Store(stores.db), REVIEWER))
    yield running
    running.stop()


@pytest.fixture
def client(viewer: RunningViewer) -> Iterator[httpx.Client]:
    # the Origin the viewer's own pages send: writes from elsewhere are refused
    origin = viewer.url.rstrip("/")
    with httpx.Client(base_url=viewer.url, timeout=60, headers={"Origin": origin}) as c:
        yield c


def _sql(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


class _Page(HTMLParser):
    """The item ids of an items page's rows, its links by id, and every tag seen."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[str] = []
        self.links: dict[str, str] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "tr" and found.get("data-item") is not None:
            self.items.append(str(found["data-item"]))
        if tag == "a" and found.get("id") and found.get("href"):
            self.links[str(found["id"])] = str(found["href"])


def _get(client: httpx.Client, path: str, status: int = 200) -> tuple[_Page, str]:
    response = client.get(path)
    assert response.status_code == status, response.text[-600:]
    page = _Page()
    page.feed(response.text)
    return page, response.text


def _items(client: httpx.Client, run_id: str, query: str = "") -> list[str]:
    """Every item the items page lists for ``query``, all pages walked."""
    found: list[str] = []
    page = 1
    while True:
        path = f"/runs/{quote(run_id)}/items?per_page=500&page={page}&{query}"
        parsed, _ = _get(client, path)
        if not parsed.items:
            return found
        found += parsed.items
        page += 1


def _rank_sql(db: Path, run_id: str, where: str = "true", order: str = "") -> list[str]:
    """The run's item ids from the ``item_disagreement`` view, filtered and ordered."""
    rows = _sql(
        db,
        f"SELECT item_id FROM item_disagreement d WHERE run_id = ? AND ({where}) "
        f"ORDER BY {order + ', ' if order else ''}disagreement_rank",
        [run_id],
    )
    return [str(r[0]) for r in rows]


def _post(client: httpx.Client, path: str, fields: Any) -> httpx.Response:
    """POST ``fields`` (a dict or (name, value) pairs) as the item page's form does."""
    pairs = list(fields.items()) if isinstance(fields, dict) else list(fields)
    return client.post(
        path,
        content=urlencode(pairs),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def _message(text: str) -> str:
    found = re.search(r'<span class="message">(.*?)</span>', text, re.S)
    assert found is not None, text[-500:]
    return unescape(found.group(1))


# -- the measures ---------------------------------------------------------------------------


def test_measures_are_the_item_disagreement_views(stores: Stores) -> None:
    columns = (
        "n_judgments, n_scored, score_spread, score_stddev, n_hallucinated_verdicts, "
        "n_clean_verdicts, split_verdict, verdict_split, span_disagreement, disagreement, "
        "consensus_status, consensus_score, consensus_hallucinated, gold_hallucinated"
    )
    names = [c.strip() for c in columns.split(",")]
    store = Store(stores.db)
    for run_id in (stores.sample, stores.synthetic):
        view = _sql(
            stores.db,
            f"SELECT item_id, {columns} FROM item_disagreement WHERE run_id = ?",
            [run_id],
        )
        assert view
        with store.read() as con:
            for row in view:
                mine = item_measures(con, run_id, row[0])
                for name, expected in zip(names, row[1:], strict=True):
                    got = mine[name]
                    if isinstance(expected, float):
                        assert got == pytest.approx(expected, abs=1e-12), (row[0], name)
                    else:
                        assert got == expected, (row[0], name)


# -- the items page -------------------------------------------------------------------------


def test_default_page_is_the_most_disputed_first_and_pages_cover_every_item(
    stores: Stores, client: httpx.Client
) -> None:
    expected = _rank_sql(stores.db, stores.synthetic)
    assert len(expected) == 300
    first, text = _get(client, f"/runs/{stores.synthetic}/items")
    assert first.items == expected[:50]
    assert re.search(r'id="match-count">300<', text)
    walked: list[str] = []
    for page in range(1, 5):
        parsed, text = _get(client, f"/runs/{stores.synthetic}/items?per_page=80&page={page}")
        walked += parsed.items
    assert walked == expected
    assert "page 4 of 4" in text
    past, text = _get(client, f"/runs/{stores.synthetic}/items?per_page=80&page=9")
    assert past.items == [] and "past the last page (4)" in text


def test_page_and_sort_links_keep_the_query(stores: Stores, client: httpx.Client) -> None:
    base = f"/runs/{stores.synthetic}/items"
    _, text = _get(client, f"{base}?per_page=80&split=1&page=2")
    following = re.search(r'<a href="([^"]*)">next ›</a>', text)
    assert following is not None
    assert _query_of(following.group(1)) == {"per_page": "80", "split": "1", "page": "3"}
    # the active sort's header flips its order, back on page 1; another sort starts desc
    spread = re.search(r'<a href="([^"]*)"[^>]*title="sort by score spread"', text)
    assert spread is not None
    assert _query_of(spread.group(1)) == {"sort": "score_spread", "per_page": "80", "split": "1"}
    _, text = _get(client, f"{base}?sort=score_spread&page=2")
    spread = re.search(r'<a href="([^"]*)" class="active"[^>]*title="sort by score spread"', text)
    assert spread is not None
    assert _query_of(spread.group(1)) == {"sort": "score_spread", "order": "asc"}


SORT_SQL = {
    "disagreement": "disagreement",
    "score_spread": "score_spread",
    "verdict_split": "verdict_split",
    "span_disagreement": "span_disagreement",
    "consensus_score": "consensus_score",
    "consensus_verdict": "consensus_hallucinated",
    "gold_mismatch": "CASE WHEN gold_hallucinated IS NOT NULL AND consensus_hallucinated "
    "IS NOT NULL THEN consensus_hallucinated <> gold_hallucinated END",
    "item": "item_id",
}


@pytest.mark.parametrize("sort", sorted(SORT_SQL))
@pytest.mark.parametrize("order", ["desc", "asc"])
def test_each_sort_is_the_views_order(
    stores: Stores, client: httpx.Client, sort: str, order: str
) -> None:
    for run_id in (stores.sample, stores.synthetic):
        expected = _rank_sql(
            stores.db, run_id, order=f"{SORT_SQL[sort]} {order.upper()} NULLS LAST"
        )
        assert _items(client, run_id, f"sort={sort}&order={order}") == expected


FILTER_SQL = {
    "split=1": "split_verdict",
    "unscored=1": "n_scored < n_judgments",
    "gold_mismatch=1": "gold_hallucinated IS NOT NULL AND consensus_hallucinated IS NOT NULL "
    "AND consensus_hallucinated <> gold_hallucinated",
    "insufficient=1": "consensus_status IS DISTINCT FROM 'ok'",
    "verdict_judge=judge-1&verdict=hallucinated": "item_id IN (SELECT item_id FROM judgments "
    "WHERE run_id = d.run_id AND judge_id = 'judge-1' AND verdict)",
    "verdict_judge=judge-0&verdict=clean": "item_id IN (SELECT item_id FROM judgments "
    "WHERE run_id = d.run_id AND judge_id = 'judge-0' AND NOT verdict)",
    "split=1&unscored=1": "split_verdict AND n_scored < n_judgments",
}


@pytest.mark.parametrize("query", sorted(FILTER_SQL))
def test_each_filter_keeps_the_items_sql_keeps(
    stores: Stores, client: httpx.Client, query: str
) -> None:
    expected = _rank_sql(stores.db, stores.synthetic, FILTER_SQL[query])
    assert expected, "the synthetic run has items of every kind"
    assert _items(client, stores.synthetic, query) == expected
    # and the count says so
    _, text = _get(client, f"/runs/{stores.synthetic}/items?{query}")
    assert re.search(rf'id="match-count">{len(expected):,}<', text)


def test_filters_on_the_offline_run(stores: Stores, client: httpx.Client) -> None:
    expected = _rank_sql(stores.db, stores.sample, FILTER_SQL["split=1"])
    assert expected and _items(client, stores.sample, "split=1") == expected
    judge = "numbers"
    expected = _rank_sql(
        stores.db,
        stores.sample,
        "item_id IN (SELECT item_id FROM judgments WHERE run_id = d.run_id "
        f"AND judge_id = '{judge}' AND verdict)",
    )
    assert _items(client, stores.sample, f"verdict_judge={judge}&verdict=hallucinated") == (
        expected
    )


def _texts(db: Path, run_id: str) -> dict[str, str]:
    rows = _sql(
        db,
        "SELECT item_id, coalesce(variables->>'response', variables->>'output', '') "
        "FROM items WHERE run_id = ?",
        [run_id],
    )
    return {str(i): str(t) for i, t in rows}


@pytest.mark.parametrize("q", ["benchmark EATERY", "100%", "a_b", "<script>", "café", "a.c"])
def test_search_finds_the_text_literally_ignoring_case(
    stores: Stores, client: httpx.Client, q: str
) -> None:
    texts = _texts(stores.db, stores.sample)
    wanted = {i for i, t in texts.items() if q.lower() in t.lower()}
    order = _rank_sql(stores.db, stores.sample)
    expected = [i for i in order if i in wanted]
    assert _items(client, stores.sample, f"q={quote(q)}") == expected
    if q in ("100%", "a_b"):  # LIKE's wildcards are plain characters here
        assert expected == ["hostile-script"]


def test_search_combines_with_filters_and_marks_the_match(
    stores: Stores, client: httpx.Client
) -> None:
    texts = _texts(stores.db, stores.sample)
    split = set(_rank_sql(stores.db, stores.sample, "split_verdict"))
    expected = [
        i
        for i in _rank_sql(stores.db, stores.sample)
        if i in split and "santa barbara" in texts[i].lower()
    ]
    assert expected
    assert _items(client, stores.sample, "q=santa+barbara&split=1") == expected
    _, text = _get(client, f"/runs/{stores.sample}/items?q=santa+barbara&split=1")
    assert "<mark>Santa Barbara</mark>" in text


# -- the item page --------------------------------------------------------------------------


def _query_of(href: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(unescape(href)).query))


def test_prev_next_walk_the_filtered_sorted_list(stores: Stores, client: httpx.Client) -> None:
    query = "sort=score_spread&order=asc&unscored=1"
    listed = _items(client, stores.synthetic, query)
    assert len(listed) > 3
    parsed, _ = _get(client, f"/runs/{stores.synthetic}/items?{query}")
    first = next(
        str(a["href"])
        for t, a in parsed.tags
        if t == "a" and str(a.get("href", "")).startswith(f"/runs/{stores.synthetic}/item?")
    )
    walked = []
    href: str | None = unescape(first)
    while href is not None:
        kept = _query_of(href)
        assert kept["sort"] == "score_spread" and kept["order"] == "asc" and kept["unscored"] == "1"
        walked.append(kept["id"])
        page, text = _get(client, href)
        assert f"item {len(walked)} of {len(listed)} matching the filter" in text
        href = unescape(page.links["next-item"]) if "next-item" in page.links else None
    assert walked == listed
    # and back one
    back = _query_of(page.links["prev-item"])
    assert back["id"] == listed[-2] and back["unscored"] == "1"


def test_item_page_shows_every_judge_the_overlay_and_the_reference(
    stores: Stores, client: httpx.Client
) -> None:
    item_id = _rank_sql(stores.db, stores.sample, "split_verdict")[0]
    parsed, text = _get(client, f"/runs/{stores.sample}/item?id={quote(item_id)}")
    judges = ["numbers", "names", "content"]
    toggles = [a.get("data-layer") for t, a in parsed.tags if t == "input" and a.get("data-layer")]
    assert toggles[:3] == ["j0", "j1", "j2"] and "consensus" in toggles and "gold" in toggles
    for k, judge in enumerate(judges):
        assert f'id="judge-j{k}"' in text and judge in text
    # one copy of the judged text: the segments put it back together exactly
    segments = re.findall(
        r'<span class="seg" data-start="(\d+)" data-end="(\d+)"[^>]*>(.*?)</span>', text, re.S
    )
    response = _texts(stores.db, stores.sample)[item_id]
    assert "".join(unescape(s) for _, _, s in segments) == response
    assert text.count('class="overlay-text"') == 1
    # the reference data the judges were given, a Python repr shown as indented JSON
    reference = _sql(stores.db, "SELECT variables->>'reference' FROM items WHERE run_id = ? "
                     "AND item_id = ?", [stores.sample, item_id])[0][0]  # fmt: skip
    shown = reference_text(reference)
    assert shown != reference and shown.startswith('{\n  "name": ')
    assert unescape(text).count(shown) == 1
    assert "<details><summary>raw output</summary>" in text or "raw output" not in text


def test_unscored_reason_and_below_quorum_are_shown(stores: Stores, client: httpx.Client) -> None:
    item_id = _rank_sql(stores.db, stores.synthetic, "consensus_status = 'insufficient'")[0]
    _, text = _get(client, f"/runs/{stores.synthetic}/item?id={item_id}")
    assert "bench: timeout" in text and "insufficient" in text


def test_bad_parameters_answer_400_with_one_line(stores: Stores, client: httpx.Client) -> None:
    run = f"/runs/{stores.synthetic}"
    cases = {
        f"{run}/items?sort=bogus": "sort='bogus' is not one of disagreement",
        f"{run}/items?order=sideways": "order='sideways' is not one of desc, asc",
        f"{run}/items?page=0": "page='0' is not a number from 1",
        f"{run}/items?page=abc": "page='abc' is not a number",
        f"{run}/items?per_page=100000": "per_page='100000' is not a number from 1 to 500",
        f"{run}/items?split=yes": "split='yes' is not a flag",
        f"{run}/items?verdict=maybe&verdict_judge=judge-0": "verdict='maybe' is not one of",
        f"{run}/items?verdict_judge=nobody&verdict=clean": "'nobody' is not a judge of this run",
        f"{run}/items?verdict_judge=judge-0": "verdict_judge and verdict go together",
        f"{run}/items?q=" + "x" * 300: "q is 300 characters long",
        f"{run}/item": "no item given",
        f"{run}/item?id=item-0000001&sort=nope": "sort='nope' is not one of",
    }
    for path, expected in cases.items():
        _, text = _get(client, path, 400)
        message = _message(text)
        assert expected in message, (path, message)
        assert "\n" not in message and "Traceback" not in text
    _, text = _get(client, f"{run}/item?id=nope", 404)
    assert "no item 'nope'" in _message(text)
    _, text = _get(client, "/runs/no-such-run/items", 404)
    assert "no run 'no-such-run'" in _message(text)


def test_hostile_responses_render_as_text(stores: Stores, client: httpx.Client) -> None:
    escaped_script = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"
    escaped_img = "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"
    pages = {
        f"/runs/{stores.sample}/items?q=benchmark": (escaped_script, escaped_img),
        f"/runs/{stores.sample}/item?id=hostile-script": (escaped_script,),
        f"/runs/{stores.sample}/item?id=hostile-img": (escaped_img, "&amp;amp; café"),
    }
    for path, expected in pages.items():
        parsed, text = _get(client, path)
        assert "img" not in [t for t, _ in parsed.tags]
        scripts = [a for t, a in parsed.tags if t == "script"]
        assert scripts in ([], [{"src": "/static/viewer.js", "defer": None}])
        for fragment in expected:
            assert fragment in text, (path, fragment)


def test_viewer_script_is_served(client: httpx.Client) -> None:
    response = client.get("/static/viewer.js")
    assert response.status_code == 200
    assert "javascript" in response.headers["content-type"]
    assert "mark-missed" in response.text


# -- adjudication ---------------------------------------------------------------------------


def _consensus_spans(db: Path, run_id: str, item_id: str) -> list[tuple[int, int]]:
    rows = _sql(
        db,
        "SELECT char_start, char_end FROM consensus_spans WHERE run_id = ? AND item_id = ? "
        "ORDER BY span_index",
        [run_id, item_id],
    )
    return [(int(a), int(b)) for a, b in rows]


def test_annotation_is_stored_and_shown(stores: Stores, client: httpx.Client) -> None:
    run = stores.synthetic
    item_id = next(
        i
        for i in _rank_sql(stores.db, run, "split_verdict")
        if len(_consensus_spans(stores.db, run, i)) >= 1
    )
    spans = _consensus_spans(stores.db, run, item_id)
    text = _texts(stores.db, run)[item_id]
    view = "sort=score_spread&split=1"
    form: list[tuple[str, str]] = [
        ("item_id", item_id),
        ("view", view),
        ("reject", f"{spans[0][0]}-{spans[0][1]}"),
        ("missed", "0-5"),
        ("missed", "7-9"),
        ("verdict", "clean"),
        ("note", 'looks fine <b>"really"</b>'),
    ]
    response = _post(client, f"/runs/{run}/annotations", form)
    assert response.status_code == 303, response.text
    target = response.headers["location"]
    assert _query_of(target) == {"id": item_id, "sort": "score_spread", "split": "1"}
    saved = latest_annotation(Store(stores.db), run, item_id)
    assert saved is not None and saved.reviewer == REVIEWER
    assert saved.verdict is False and saved.missed == ((0, 5), (7, 9))
    assert [(d.char_start, d.char_end, d.accepted) for d in saved.decisions] == [
        (spans[0][0], spans[0][1], False)
    ]
    assert saved.note == 'looks fine <b>"really"</b>'
    parsed, page = _get(client, target)
    assert f"Latest annotation: <b>{REVIEWER}</b>" in page
    assert "&lt;b&gt;&#34;really&#34;&lt;/b&gt;" in page
    # the form comes back as it was saved, and the annotation is a layer of its own
    checked = {
        (a.get("name"), a.get("value"))
        for t, a in parsed.tags
        if t == "input" and "checked" in a and a.get("type") == "radio"
    }
    assert (f"span-{spans[0][0]}-{spans[0][1]}", "reject") in checked
    assert ("verdict", "clean") in checked
    missed = [a.get("value") for t, a in parsed.tags if t == "input" and a.get("name") == "missed"]
    assert missed == ["0-5", "7-9"]
    assert f"“{text[0:5]}” (0–5)" in unescape(page)
    assert 'data-layer="annotation"' in page

    # the radio groups' own fields decide a span as accept=/reject= do
    radio = f"span-{spans[0][0]}-{spans[0][1]}"
    response = _post(
        client,
        f"/runs/{run}/annotations",
        {"item_id": item_id, radio: "accept", "verdict": "hallucinated"},
    )
    assert response.status_code == 303
    saved = latest_annotation(Store(stores.db), run, item_id)
    assert saved is not None and saved.verdict is True and saved.decisions[0].accepted
    assert saved.spans[0] == spans[0]


def test_bad_annotations_answer_400(stores: Stores, client: httpx.Client) -> None:
    run = stores.synthetic
    item_id = _rank_sql(stores.db, run)[0]
    spans = _consensus_spans(stores.db, run, item_id)
    length = len(_texts(stores.db, run)[item_id])
    cases: dict[str, list[tuple[str, str]]] = {
        "is not START-END": [("missed", "abc")],
        "is outside the judged text": [("missed", f"0-{length + 1}")],
        "is outside the judged": [("missed", "5-2")],
        "is not a consensus span of this item": [("accept", f"{length - 1}-{length}")],
        "is not hallucinated, clean or unset": [("verdict", "maybe")],
        "the form has no item_id": [("item_id", "")],
    }
    if spans:
        value = f"{spans[0][0]}-{spans[0][1]}"
        cases["is both accepted and rejected"] = [("accept", value), ("reject", value)]
    for expected, fields in cases.items():
        data = [("item_id", item_id), *fields] if fields[0][0] != "item_id" else fields
        response = _post(client, f"/runs/{run}/annotations", data)
        assert response.status_code == 400, (expected, response.text[-300:])
        message = _message(response.text)
        assert expected in message and "\n" not in message
    response = _post(client, f"/runs/{run}/annotations", {"item_id": "nope"})
    assert response.status_code == 400 and "no item 'nope'" in _message(response.text)


def test_cross_origin_annotation_is_refused(stores: Stores, viewer: RunningViewer) -> None:
    item_id = _rank_sql(stores.db, stores.synthetic)[0]
    with httpx.Client(base_url=viewer.url, headers={"Origin": "http://evil.example"}) as other:
        response = _post(
            other, f"/runs/{stores.synthetic}/annotations", {"item_id": item_id, "verdict": "clean"}
        )
    assert response.status_code == 403


def test_queue_walks_the_most_disputed_unreviewed_items(
    stores: Stores, client: httpx.Client
) -> None:
    run = stores.sample
    order = _rank_sql(stores.db, run)
    response = client.get(f"/runs/{run}/queue")
    assert response.status_code == 303
    first = _query_of(response.headers["location"])
    assert first == {"id": order[0], "queue": "1"}
    _, text = _get(client, response.headers["location"])
    assert 'name="queue" value="1"' in text
    response = _post(
        client, f"/runs/{run}/annotations", {"item_id": order[0], "verdict": "clean", "queue": "1"}
    )
    assert response.status_code == 303 and response.headers["location"] == f"/runs/{run}/queue"
    response = client.get(f"/runs/{run}/queue")
    assert _query_of(response.headers["location"])["id"] == order[1]


def test_queue_says_when_every_item_is_reviewed(stores: Stores) -> None:
    running = start_in_thread(ViewerState(Store(stores.done), REVIEWER))
    try:
        with httpx.Client(
            base_url=running.url, headers={"Origin": running.url.rstrip("/")}, timeout=30
        ) as c:
            for _ in range(2):
                location = c.get(f"/runs/{bench_viewer.RUN_ID}/queue").headers["location"]
                item_id = _query_of(location)["id"]
                answer = _post(
                    c,
                    f"/runs/{bench_viewer.RUN_ID}/annotations",
                    {"item_id": item_id, "verdict": "clean", "queue": "1"},
                )
                assert answer.status_code == 303
            done = c.get(f"/runs/{bench_viewer.RUN_ID}/queue")
            assert done.status_code == 200 and 'id="queue-done"' in done.text
    finally:
        running.stop()
