"""The settings of an MLPerf submission's launch configuration: `config_<SYSTEM>_*.sh` files
(`export NAME=VALUE`, `source` of sibling files, `${NAME:-default}`, `: "${NAME:=default}"`) and the
defaults their NeMo YAML files give environment variables (`${oc.env:NAME,default}`).

Read, never run: exports inside an `if` block are left out (the conditions select optional modes,
off by default), and the value a setting ends with is the last one exported at the top level, as
the shell would leave it. A sourced file the submission does not hold (some leave out a
`config_common*.sh` their configuration sources) is listed in `missing` and passed over: the
settings it would make are unknown. Pure Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

_EXPORT = re.compile(r"^export\s+([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_ASSIGN_DEFAULT = re.compile(r'^:\s+"?\$\{([A-Za-z_][A-Za-z0-9_]*):=([^}]*)\}"?\s*$')
_SOURCE = re.compile(r"^(?:source|\.)\s+\$\(dirname\s+\$\{BASH_SOURCE\[0\]\}\)/(\S+)\s*$")
_DEFAULT_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}")
_OC_ENV = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*),([^{}$]+?)\}")
_YAML_LITERAL = re.compile(r"^\s*([a-z_]+):\s*([0-9]+)\s*(?:#.*)?$")


@dataclass
class Setting:
    """A configuration value and where it was set (file and line)."""

    value: str
    path: str  # the file that set it
    line: int


@dataclass
class LaunchConfig:
    """Settings by name, each with the file and line it came from, and the files read."""

    settings: dict[str, Setting] = field(default_factory=dict)
    yaml_defaults: dict[str, Setting] = field(default_factory=dict)  # ${oc.env:NAME,default}
    yaml_literals: dict[str, Setting] = field(default_factory=dict)  # e.g. encoder_seq_length: 2048
    files: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # sourced files that could not be read

    def get(self, name: str) -> Setting | None:
        return self.settings.get(name) or self.yaml_defaults.get(name)


def _strip(value: str) -> str:
    value = value.split(" #", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return value


def read_shell(
    path: str,
    read: Callable[[str], str],
    config: LaunchConfig | None = None,
    *,
    sourced: bool = False,
    resolve: Callable[[str], str] | None = None,
) -> LaunchConfig:
    """Read a config_*.sh file and the files it sources (paths relative to its directory, mapped by
    `resolve` to the path to read where given); a sourced file `read` cannot give (OSError,
    ValueError) goes into `missing`."""
    config = config if config is not None else LaunchConfig()
    try:
        text = read(path)
    except (OSError, ValueError):
        if not sourced:
            raise
        config.missing.append(path)
        return config
    config.files.append(path)
    directory = path.rsplit("/", 1)[0] if "/" in path else ""
    depth = 0
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        first = line.split()[0]
        if first in ("if", "case", "for", "while"):
            depth += 1
            continue
        if first in ("fi", "esac", "done"):
            depth = max(0, depth - 1)
            continue
        if depth:
            continue
        m = _SOURCE.match(line)
        if m:
            src = f"{directory}/{m.group(1)}" if directory else m.group(1)
            read_shell(resolve(src) if resolve else src, read, config, sourced=True, resolve=resolve)
            continue
        m = _EXPORT.match(line)
        if m:
            value = _DEFAULT_REF.sub(
                lambda d: config.settings[d.group(1)].value if d.group(1) in config.settings else d.group(2),
                _strip(m.group(2)),
            )
            config.settings[m.group(1)] = Setting(value, path, i)
            continue
        m = _ASSIGN_DEFAULT.match(line)
        if m and m.group(1) not in config.settings:
            config.settings[m.group(1)] = Setting(_strip(m.group(2)), path, i)
    return config


def read_yaml_defaults(path: str, text: str, config: LaunchConfig) -> None:
    """Add the environment defaults (`${oc.env:NAME,default}`) and integer literals of a NeMo YAML."""
    config.files.append(path)
    for i, line in enumerate(text.splitlines(), 1):
        for m in _OC_ENV.finditer(line):
            config.yaml_defaults.setdefault(m.group(1), Setting(m.group(2).strip(), path, i))
        m = _YAML_LITERAL.match(line)  # type: ignore[assignment]  # m is reused for a Match or None
        if m:
            config.yaml_literals.setdefault(m.group(1), Setting(m.group(2), path, i))
