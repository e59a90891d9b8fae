"""Command-line options generated from a spec dataclass's field documentation (spec.doc), so that
a field's meaning, unit and allowed values are written once."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from scalestudy.spec.run import describe_field, field_doc

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def add_field_options(
    group: argparse._ActionsContainer, cls: type, parsers: dict[str, tuple[Callable[[str], Any], str]] | None = None
) -> None:
    """One `--field-name` option per field of `cls`, default None (unset: the spec file's or the
    field's default). `parsers` maps a field to (argument type, how its default is shown)."""
    parsers = parsers or {}
    for f in fields(cls):
        flag = "--" + f.name.replace("_", "-")
        d = field_doc(f)
        if f.name in parsers:
            kind, shown = parsers[f.name]
            group.add_argument(flag, dest=f.name, type=kind, default=None, help=_escape(describe_field(f, shown)))
            continue
        kind = _TYPES[str(f.type)]
        default = f.default if f.default is not MISSING else None
        if kind is bool:
            group.add_argument(
                flag,
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=_escape(describe_field(f, str(default).lower())),
            )
        elif kind is str and isinstance(d.allowed, tuple):
            group.add_argument(
                flag, dest=f.name, type=str, choices=d.allowed, default=None, help=_escape(describe_field(f))
            )
        else:
            group.add_argument(flag, dest=f.name, type=kind, default=None, help=_escape(describe_field(f)))


def _escape(text: str) -> str:
    return text.replace("%", "%%")  # argparse %-formats help strings
