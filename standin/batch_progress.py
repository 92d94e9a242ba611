"""How a stand-in batch moves on: each poll processes the requests due and ends the batch
when its time has come; each request is answered as the real-time endpoints answer it."""

from __future__ import annotations

import math
import random
import time
from typing import Any, Literal

from juryflow.standin.batch_state import (
    Api,
    Batch,
    BatchStore,
    Entry,
    Outcome,
    OutcomeKind,
    StoredFile,
)
from juryflow.standin.batch_wire import jsonl, now, openai_line
from juryflow.standin.http_wire import error_body
from juryflow.standin.model import (
    FAULTS,
    ServerState,
    answer_seed,
    anthropic_message,
    make_answer,
    openai_completion,
    parse_model,
    prompt_of,
    request_kind,
)

# Where a batch request is counted in the server's request stats (by_path).
_STATS_PATH: dict[Api, str] = {
    "openai": "batch /v1/chat/completions",
    "anthropic": "batch /v1/messages",
}
_FAULT_STATUS = {"400": 400, "401": 401, "403": 403, "404": 404, "429": 429, "500": 500}


class Progress:
    """Moves a batch on by one poll: processes the requests due, ends it when it is time."""

    def __init__(self, server: ServerState, store: BatchStore, batch: Batch) -> None:
        self.server = server
        self.store = store
        self.batch = batch
        self.config = server.config

    def poll(self) -> None:
        batch = self.batch
        if batch.ended:
            return
        batch.polls += 1
        if batch.errors:
            self._end("failed")
            return
        if batch.state == "canceling":
            self._end("canceled")
            return
        steps = max(1, self.config.batch_polls_to_finish)
        step = self._step(steps)
        expire = self.config.batch_polls_to_expire
        if expire is not None and step >= expire:
            self._end("expired")
            return
        if self.config.batch_never_finishes:
            return
        total = len(batch.entries)
        due = total if step >= steps - 1 else total * step // (steps - 1)
        for entry in batch.entries[len(batch.outcomes) : due]:
            batch.outcomes[entry.custom_id] = self._answer(entry)
        if step >= steps:
            self._end("completed")

    def _step(self, steps: int) -> int:
        seconds = self.config.batch_seconds_to_finish
        if seconds is None:
            return self.batch.polls
        if seconds <= 0:
            return steps
        return math.floor((time.monotonic() - self.batch.started) / seconds * steps)

    def _end(self, state: Literal["completed", "canceled", "expired", "failed"]) -> None:
        batch = self.batch
        unprocessed: OutcomeKind = "canceled" if state == "canceled" else "expired"
        if state != "failed":
            for entry in batch.entries:
                batch.outcomes.setdefault(entry.custom_id, Outcome(unprocessed))
        batch.state = state
        batch.ended_at = time.time()
        if batch.api == "openai" and state != "failed":
            self._openai_files()

    def _openai_files(self) -> None:
        batch = self.batch
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for number, entry in enumerate(batch.entries, 1):
            outcome = batch.outcomes[entry.custom_id]
            line = openai_line(f"batch_req_{batch.id}_{number}", entry.custom_id, outcome)
            (output if outcome.kind == "succeeded" else errors).append(line)
        for lines, attribute in ((output, "output_file_id"), (errors, "error_file_id")):
            if lines:
                stored = StoredFile(
                    self.store.new_id("file-stub"), "batch_output", "", jsonl(lines), now()
                )
                self.store.files[stored.id] = stored
                setattr(batch, attribute, stored.id)

    def _answer(self, entry: Entry) -> Outcome:
        """One request of the batch, answered as the real-time endpoint would answer it."""
        server, api, body = self.server, self.batch.api, entry.body
        model = str(body.get("model", ""))
        number = server.stats._start(_STATS_PATH[api], model)
        self.store.stats.count("batch_requests", model)
        outcome = self._outcome(api, body, model, number)
        server.stats._finish(outcome.kind if outcome.kind != "errored" else str(outcome.status))
        return outcome

    def _outcome(self, api: Api, body: dict[str, Any], model: str, number: int) -> Outcome:
        config, server = self.config, self.server
        try:
            rule = parse_model(model, config.default_answer)
        except ValueError as error:
            return errored(api, 400, str(error))
        step = server.next_step(model)
        fault: str | None
        if step is not None:
            fault = step if step in FAULTS else None
        else:
            fault = rule.fault_for(number - 1) or server.random_fault()
        if fault in ("hang", "drop"):
            return Outcome("expired")
        if fault == "401":
            return errored(api, 401, f"stub: Incorrect API key provided: {self.batch.key}")
        if fault in _FAULT_STATUS:
            status = _FAULT_STATUS[fault]
            return errored(api, status, f"stub: batch request failed with HTTP {status}")
        if fault == "echo":
            return errored(api, 400, f"stub: cannot route batch {self.batch.id}")
        if api == "anthropic" and self.batch.version >= "2026-10-21":
            sampling = [p for p in ("temperature", "top_p", "top_k") if p in body]
            if sampling:
                return errored(api, 400, f"{sampling[0]}: Extra inputs are not permitted")
        prompt = prompt_of(body)
        server.stats._prompt(prompt)
        kind = request_kind(body, prompt)
        # The real-time endpoints' seed: a batch answers exactly what a real-time call would.
        draw = server.draw_for(body, model, prompt)
        rng = random.Random(answer_seed(config.seed, model, prompt, draw))
        try:
            answer = make_answer(
                "broken" if fault == "malformed" else step or rule.answer,
                kind,
                prompt,
                rng,
                config.gold,
                config.seed,
                model,
                draw,
            )
        except ValueError as error:
            return errored(api, 400, str(error))
        build = anthropic_message if api == "anthropic" else openai_completion
        return Outcome("succeeded", 200, build(body, answer, rule, prompt, number))


def errored(api: Api, status: int, message: str) -> Outcome:
    return Outcome("errored", status, error_body(api, status, message))
