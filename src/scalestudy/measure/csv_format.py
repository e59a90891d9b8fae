"""How the analysis writes and reads its CSV files, so that the same raw logs give the same bytes.

- Rows are written in the order given (callers sort them); columns in a fixed order.
- Numbers: integers as integers, floats with '%.10g' (ten significant digits: stable across
  platforms and summation orders, far below any measurement's precision); -0 is written 0.
- Null (None, NaN) is the empty field; booleans are `true` / `false`; lists are ';'-joined.
- UTF-8, '\n' line ends, minimal quoting. No timestamps anywhere.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

from scalestudy.measure.rawlog import atomic_write_text

FLOAT_FORMAT = "%.10g"
LIST_SEPARATOR = ";"


def format_value(v: Any) -> str:
    """A value as the CSV tables write it: '' for None and NaN, true/false, fixed float format, lists joined."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if v == 0:
            return "0"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return FLOAT_FORMAT % v
    if isinstance(v, (list, tuple)):
        return LIST_SEPARATOR.join(format_value(x) for x in v)
    # numpy scalars, without importing numpy here
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return format_value(float(v))
    return str(v)


def csv_text(columns: Sequence[str], rows: Iterable[dict]) -> str:
    """The CSV text of `rows` under `columns` (a missing value: empty)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([format_value(row.get(c)) for c in columns])
    return buf.getvalue()


def write_csv(path: os.PathLike | str, columns: Sequence[str], rows: Iterable[dict]) -> Path:
    """Write `rows` as CSV to `path` atomically, creating its directory; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, csv_text(columns, rows))
    return path


class UnreadableCsvError(ValueError):
    """A file that is not a readable CSV (binary, not UTF-8, NUL bytes), naming it."""

    def __init__(self, path: os.PathLike | str, reason: str):
        self.path = str(path)
        super().__init__(f"{path}: not a readable CSV file ({reason})")


def read_csv_rows(path: os.PathLike | str) -> list[dict[str, str]]:
    """The rows of a CSV as strings (no type guessing): what provenance and audit read."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except UnicodeDecodeError as e:
        raise UnreadableCsvError(
            path, f"binary or not UTF-8: byte {e.start} is {e.object[e.start : e.start + 1]!r}"
        ) from None
    except csv.Error as e:
        raise UnreadableCsvError(path, str(e)) from None


def read_table(path: os.PathLike | str):
    """A CSV written here as a pandas DataFrame: empty fields are NaN, nothing else is."""
    import pandas as pd  # heavy: only when a table is read

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing")
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""], true_values=["true"], false_values=["false"])
    except (UnicodeDecodeError, pd.errors.ParserError) as e:
        raise UnreadableCsvError(path, f"{type(e).__name__}: {e}") from None


def split_list(v: Any) -> list[str]:
    """A list cell as a list of strings: a table's joined text (as read back), or a list already (a row in memory)."""
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
        return []
    return [x for x in str(v).split(LIST_SEPARATOR) if x]
