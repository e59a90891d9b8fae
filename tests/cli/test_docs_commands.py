"""Every `scalestudy` command the README and docs/ show parses with today's options, and every
`snakemake --config KEY=...` they show names a key the workflow's config schema knows."""

import re
import shlex
from pathlib import Path

import pytest
import yaml

from scalestudy.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _commands(tool: str) -> list[tuple[str, str]]:
    """(where, command line) for each `tool ...` at the start of a line of a code block (continued
    lines joined) and each inline `tool --...` in backticks; [optional] parts are kept, unbracketed.
    A bare `tool subcommand` in running text names a command and is not checked."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in re.finditer(rf"^[ \t]*(?:\$ )?((?:[A-Z_]+=\S+ )*{tool} (?:[^\n#]*\\\n)*[^\n#`]*)", text, re.M):
            out.append((doc, text[: m.start()].count("\n") + 1, m.group(1)))
        for m in re.finditer(rf"`((?:[A-Z_]+=\S+ )*{tool} [^`]*)`", text):
            if " -" in m.group(1):
                out.append((doc, text[: m.start()].count("\n") + 1, m.group(1)))
    seen, result = set(), []
    for doc, n, cmd in out:
        cmd = " ".join(cmd.replace("\\\n", " ").replace("[", " ").replace("]", " ").split())
        if "..." in cmd or "<" in cmd or (doc.name, n, cmd) in seen:
            continue
        seen.add((doc.name, n, cmd))
        result.append((f"{doc.name}:{n}", cmd))
    return result


SCALESTUDY = _commands("scalestudy")
SNAKEMAKE = _commands("snakemake")


def test_the_docs_show_commands():
    assert len(SCALESTUDY) >= 10 and len(SNAKEMAKE) >= 10


@pytest.mark.parametrize("where,cmd", SCALESTUDY, ids=[w for w, _ in SCALESTUDY])
def test_a_documented_scalestudy_command_parses(where, cmd):
    words = shlex.split(cmd)
    argv = words[[i for i, w in enumerate(words) if w == "scalestudy"][0] + 1 :]
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{where}: `{cmd}` does not parse (exit {e.code})")


@pytest.mark.parametrize("where,cmd", SNAKEMAKE, ids=[w for w, _ in SNAKEMAKE])
def test_a_documented_snakemake_config_key_exists(where, cmd):
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    words = shlex.split(cmd)
    if "--config" not in words:  # noqa: SIM102
        return
    for w in words[words.index("--config") + 1 :]:
        if w.startswith("-"):
            break
        key = w.split("=", 1)[0]
        assert key in schema["properties"], f"{where}: `{cmd}`: --config {key} is not a config key"
