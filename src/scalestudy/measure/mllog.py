"""MLPerf logging (mllog) streams: the `:::MLLOG {json}` lines of an MLPerf Training result file.

A result file (`results/<system>/<benchmark>/result_N.txt`) interleaves the job's console output
with mllog events, one a line: `:::MLLOG {"namespace", "time_ms", "event_type", "key", "value",
"metadata"}`. Other lines are kept out; a line that holds the marker but not a whole JSON event is
refused, naming the file and the line. Pure Python.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

MARKER = ":::MLLOG"
EVENT_TYPES = ("POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END")
REQUIRED = ("time_ms", "event_type", "key", "value", "metadata")


class MLLogError(ValueError):
    """A malformed mllog line: names the file and the line number."""

    def __init__(self, path: str, line: int, reason: str):
        self.path, self.line, self.reason = path, line, reason
        super().__init__(f"{path}:{line}: {reason}")


@dataclass(frozen=True)
class Event:
    """One MLPerf logging event (a :::MLLOG line)."""

    line: int  # 1-based line of the result file
    time_ms: float
    event_type: str
    key: str
    value: Any
    metadata: dict = field(default_factory=dict)


def parse_line(text: str, path: str, line: int) -> Event | None:
    """The event of one line, None for a line without the marker."""
    at = text.find(MARKER)
    if at < 0:
        return None
    body = text[at + len(MARKER) :].strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise MLLogError(path, line, f"the {MARKER} event is not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise MLLogError(path, line, f"the {MARKER} event is not a JSON object")
    missing = [k for k in REQUIRED if k not in obj]
    if missing:
        raise MLLogError(path, line, f"the {MARKER} event lacks {', '.join(missing)}")
    if obj["event_type"] not in EVENT_TYPES:
        raise MLLogError(path, line, f"unknown event_type {obj['event_type']!r} (known: {', '.join(EVENT_TYPES)})")
    if not isinstance(obj["time_ms"], (int, float)) or isinstance(obj["time_ms"], bool):
        raise MLLogError(path, line, f"time_ms is not a number: {obj['time_ms']!r}")
    if not isinstance(obj["metadata"], dict):
        raise MLLogError(path, line, "metadata is not a JSON object")
    return Event(line, float(obj["time_ms"]), obj["event_type"], str(obj["key"]), obj["value"], obj["metadata"])


def parse(text: str, path: str) -> list[Event]:
    """Every event of a result file's text, in file order."""
    return [e for e in (parse_line(t, path, i) for i, t in enumerate(text.splitlines(), 1)) if e is not None]


def first_value(events: Iterable[Event], key: str, default: Any = None) -> Any:
    """The value of the first event with `key`, else `default`."""
    for e in events:
        if e.key == key:
            return e.value
    return default


def spans(
    events: list[Event], start: str, stop: str, path: str, problems: list[str] | None = None
) -> list[tuple[Event, Event]]:
    """The (start, stop) pairs of an interval kind (block_start/block_stop, eval_start/eval_stop),
    in order; a stop without its start, or a start left open before the next, is refused - or, with
    `problems`, described there (one sentence naming the file and line) and left out of the pairs."""
    out, open_ = [], None

    def bad(line: int, reason: str) -> None:
        if problems is None:
            raise MLLogError(path, line, reason)
        problems.append(f"{path}:{line}: {reason}")

    for e in events:
        if e.key == start:
            if open_ is not None:
                bad(e.line, f"{start} while the {start} of line {open_.line} is still open")
            open_ = e
        elif e.key == stop:
            if open_ is None:
                bad(e.line, f"{stop} without a {start} before it")
                continue
            out.append((open_, e))
            open_ = None
    return out
