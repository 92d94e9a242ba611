"""Which requests a batch left unanswered are sent again by ``--resume``, and the unscored
reason that marks them (the mark is how a resumed run finds them among stored rows)."""

from __future__ import annotations

from juryflow.judges.batches.records import BatchFailure
from juryflow.maths.records import Judgment

RESEND = "(batch mode: --resume sends it again)"
"""How the reason of a request a batch left unanswered ends: the mark of a row to send again."""
_RETRIED_STATUSES = frozenset({408, 409, 429})


def resendable(judgment: Judgment) -> bool:
    """A request a batch left unanswered (or never sent): ``--resume`` sends it again."""
    reason = judgment.unscored_reason
    return judgment.score is None and reason is not None and reason.endswith(RESEND)


def failure_reason(batch_id: str, failure: BatchFailure) -> tuple[str, bool]:
    """The unscored reason of a request ``batch_id`` did not answer, and whether it is to be
    sent again: all but an error the provider would give again (a 4xx)."""
    status = failure.status
    again = failure.kind != "errored" or status is None or status in _RETRIED_STATUSES
    again = again or (status is not None and status >= 500)
    if failure.kind == "errored":
        code = f"HTTP {status}: " if status is not None else ""
        reason = f"provider error in batch {batch_id}: {code}{failure.reason}"
    else:
        reason = f"not answered in batch {batch_id}: {failure.kind}: {failure.reason}"
    return (f"{reason} {RESEND}" if again else reason), again
