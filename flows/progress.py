"""A process-wide progress hook: the CLI listens, the flow reports. Never part of results."""

from __future__ import annotations

from collections.abc import Callable

ProgressListener = Callable[[str, int], None]
"""Called with an event name ('total', 'judged', 'items_done') and a count."""

_listeners: list[ProgressListener] = []


def add_listener(listener: ProgressListener) -> None:
    _listeners.append(listener)


def remove_listener(listener: ProgressListener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def report(event: str, count: int) -> None:
    for listener in list(_listeners):
        listener(event, count)
