"""Tracebacks, commands and settings without the paths of the machine that ran them.

A raw log is committed and published; a traceback's `File "/abs/path/..."` lines would carry the
measuring machine's directory layout into it. Each file is named from its import root instead
(`scalestudy/harness/train.py`, `torch/nn/modules/module.py`), which is what a reader needs to
find the line. A command's arguments and the environment's settings are made portable the same
way: a path under the working directory relative to it, a source file from its import root, any
other absolute path as `<host>/` and its last two parts (portable_value).
"""

from __future__ import annotations

import os
import re
import sys
import traceback

_ROOT_MARKERS = ("/site-packages/", "/dist-packages/", "/src/")
_FILE_LINE = re.compile(r'File "([^"]+)"')


def portable_path(filename: str) -> str:
    """A source file's path from its import root (sys.path entry or a packages directory); a path
    under none of them keeps only its last two parts."""
    if not filename.startswith("/"):
        return filename
    roots = sorted((p.rstrip("/") + "/" for p in sys.path if p.startswith("/")), key=len, reverse=True)
    for root in roots:
        if filename.startswith(root):
            return filename[len(root) :]
    for marker in _ROOT_MARKERS:
        if marker in filename:
            return filename.rsplit(marker, 1)[1]
    return "/".join(filename.rsplit("/", 2)[-2:])


HOST = "<host>"
_ABSOLUTE = re.compile(r"(?<![\w.])(/[^\s:,;=\"']+)")


def _portable_absolute(path: str, cwd: str) -> str:
    if path == cwd or path.startswith(cwd.rstrip("/") + "/"):
        rel = path[len(cwd) :].lstrip("/")
        return rel or "."
    if path.endswith(".py"):
        return portable_path(path)
    return f"{HOST}/" + "/".join(path.rstrip("/").rsplit("/", 2)[-2:])


def portable_value(text: str, cwd: str | None = None) -> str:
    """`text` (an argument, a setting, a PATH-like list) with every absolute path in it made portable:
    relative to `cwd` (default: the working directory) where under it, a source file from its import
    root, any other as `<host>/` plus its last two parts."""
    cwd = os.path.realpath(cwd or os.getcwd())
    return _ABSOLUTE.sub(lambda m: _portable_absolute(m.group(1), cwd), text)


def portable_text(text: str) -> str:
    """A formatted traceback with every `File "..."` path made portable."""
    return _FILE_LINE.sub(lambda m: f'File "{portable_path(m.group(1))}"', text)


def portable_traceback(e: BaseException) -> str:
    """The traceback of `e` with every file path made portable (portable_text)."""
    return portable_text("".join(traceback.format_exception(e)))
