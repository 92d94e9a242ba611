"""Pages about items: a run's items (paged, sorted, filtered, searched) and one item, with
its adjudication form; the queue of unreviewed items; the annotation POST.

Reads take a read-only connection under ``ViewerState.exclusive()`` (see
:class:`~juryflow.viewer.state.ViewerState`); the one write, an annotation, goes through
:func:`~juryflow.storage.annotations.save_annotation` under the same lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from juryflow.analysis.self_agreement_report import sample_answers
from juryflow.pages.rule_labels import RunRule
from juryflow.storage.annotations import latest_annotation, next_in_queue, save_annotation
from juryflow.storage.connection import StoreError, StoreLockedError
from juryflow.storage.reads import consensus_facts as cf
from juryflow.storage.reads import item_queries as iq
from juryflow.viewer import rendering
from juryflow.viewer.item_model import item_href, item_model, items_model, run_href
from juryflow.viewer.items_query import (
    RequestError,
    form_item_id,
    parse_annotation_form,
    parse_item_id,
    parse_items_query,
)
from juryflow.viewer.state import ViewerState

T = TypeVar("T")


def _read(state: ViewerState, work: Callable[[Any], T]) -> T:
    """``work(connection)`` on a read-only connection, under the process's file lock."""
    with state.exclusive() as store, store.read() as con:
        return work(con)


def _bad(error: Exception) -> HTTPException:
    return HTTPException(status_code=400, detail=str(error).splitlines()[0])


def _no_run(run_id: str) -> HTTPException:
    return HTTPException(status_code=404, detail=f"no run {run_id!r} in this store; see /")


def _judges_of(con: Any, run_id: str) -> list[str]:
    if not iq.run_exists(con, run_id):
        raise _no_run(run_id)
    return iq.run_judges(con, run_id)


def items_page(request: Request) -> Response:
    state = rendering.state_of(request)
    run_id = str(request.path_params["run_id"])

    def work(con: Any) -> Any:
        judges = _judges_of(con, run_id)
        try:
            query = parse_items_query(request.query_params, judges)
        except RequestError as error:
            raise _bad(error) from None
        page = iq.items_page(
            con, run_id, query.item_filter, query.item_order,
            limit=query.per_page, offset=query.offset,
        )  # fmt: skip
        return items_model(
            run_id, judges, query, page,
            rule=RunRule.of(cf.run_rule(con, run_id)),
            verdict_rules=cf.run_verdict_rules(con, run_id),
            facts=cf.consensus_facts(con, run_id, [row.item_id for row in page.rows]),
        )  # fmt: skip

    return rendering.render(request, "items.html", m=_read(state, work))


def item_page(request: Request) -> Response:
    state = rendering.state_of(request)
    run_id = str(request.path_params["run_id"])
    params = request.query_params
    queue = params.get("queue", "") == "1"

    def work(con: Any) -> Any:
        judges = _judges_of(con, run_id)
        try:
            item_id = parse_item_id(params)
            query = parse_items_query(params, judges)
        except RequestError as error:
            raise _bad(error) from None
        record = iq.item_record(con, run_id, item_id)
        if record is None:
            raise HTTPException(
                status_code=404,
                detail=f"no item {item_id!r} in run {run_id}; pick one from its items page",
            )
        around = iq.neighbours(con, run_id, item_id, query.item_filter, query.item_order)
        rule = RunRule.of(cf.run_rule(con, run_id))
        facts = cf.consensus_facts(con, run_id, [item_id]).get(item_id)
        return record, query, around, rule, facts

    record, query, around, rule, facts = _read(state, work)
    with state.exclusive() as store:
        annotation = latest_annotation(store, run_id, record.item_id)
        # The repeated samples of judges with samples: N > 1, shown side by side.
        samples = sample_answers(store, run_id, [record.item_id]).get(record.item_id, [])
    model = item_model(record, annotation, query, around, queue=queue, rule=rule, facts=facts)
    return rendering.render(request, "item.html", m=model, samples=samples, reviewer=state.reviewer)


def queue_page(request: Request) -> Response:
    state = rendering.state_of(request)
    run_id = str(request.path_params["run_id"])
    _read(state, lambda con: _judges_of(con, run_id))
    with state.exclusive() as store:
        item_id = next_in_queue(store, run_id)
    if item_id is not None:
        return RedirectResponse(item_href(run_id, item_id, queue=True), status_code=303)
    return rendering.render(request, "queue_done.html", run_id=run_id, run_href=run_href(run_id))


async def post_annotation(request: Request) -> Response:
    state = rendering.state_of(request)
    run_id = str(request.path_params["run_id"])
    fields = await _form_fields(request)
    first = {name: values[-1] for name, values in fields.items() if values}

    def work(con: Any) -> Any:
        judges = _judges_of(con, run_id)
        item_id = form_item_id(first)
        record = iq.item_record(con, run_id, item_id)
        if record is None:
            raise RequestError(f"no item {item_id!r} in run {run_id}; reload the run's items")
        spans = [
            (s.char_start, s.char_end) for s in (record.consensus.spans if record.consensus else ())
        ]
        return parse_annotation_form(fields, spans, len(record.text)), _view_of(fields, judges)

    def save() -> Any:
        try:
            parsed, view = _read(state, work)
        except RequestError as error:
            raise _bad(error) from None
        try:
            with state.exclusive() as store:
                save_annotation(store, parsed.annotation(run_id, state.reviewer))
        except StoreLockedError:
            raise  # the app answers 503 with Retry-After
        except StoreError as error:
            raise _bad(error) from None
        return parsed, view

    parsed, view = await run_in_threadpool(save)
    if parsed.queue:
        target = f"{run_href(run_id)}/queue"
    else:
        target = item_href(run_id, parsed.item_id, view)
    return RedirectResponse(target, status_code=303)


MAX_FORM_BYTES = 1_000_000
FORM_TYPE = "application/x-www-form-urlencoded"


async def _form_fields(request: Request) -> dict[str, list[str]]:
    """The posted form, field -> values. Read here rather than by ``request.form()``, which
    needs python-multipart: the adjudication form is URL-encoded, and that is all it takes."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != FORM_TYPE:
        raise HTTPException(
            status_code=400, detail=f"post the form as {FORM_TYPE}, not {kind or 'nothing'}"
        )
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(
                status_code=413, detail=f"the form is over {MAX_FORM_BYTES:,} bytes; send less"
            )
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise HTTPException(
            status_code=400, detail="the form is not UTF-8; post it from the item page"
        ) from None
    fields: dict[str, list[str]] = {}
    for name, value in pairs:
        fields.setdefault(name, []).append(value)
    return fields


def _view_of(fields: dict[str, list[str]], judges: list[str]) -> str:
    """The items query the item page was opened with (its form's ``view`` field), checked
    again, so that the redirect back keeps the filter and sort prev/next walk."""
    raw = (fields.get("view") or [""])[-1]
    try:
        return parse_items_query(dict(parse_qsl(raw)), judges).query_string()
    except RequestError:
        return ""


def routes() -> list[BaseRoute]:
    return [
        Route("/runs/{run_id}/items", items_page, methods=["GET"]),
        Route("/runs/{run_id}/item", item_page, methods=["GET"]),
        Route("/runs/{run_id}/queue", queue_page, methods=["GET"]),
        Route("/runs/{run_id}/annotations", post_annotation, methods=["POST"]),
    ]
