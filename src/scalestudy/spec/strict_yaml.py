"""YAML as the package reads its own files (studies, specs, the site file): a key given twice in
one mapping is refused, naming the file, the key and both lines (PyYAML's safe_load keeps the
last one silently). Pure data: no torch import."""

from __future__ import annotations

import io
import json
from pathlib import Path

import yaml

MERGE_TAG = "tag:yaml.org,2002:merge"


# libyaml's parser where PyYAML has it (every wheel does): the same documents, about six times faster
# than the pure-Python one (0.03 s against 0.19 s for the checkout's 51 YAML files)
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """PyYAML's SafeLoader refusing a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line)
                except TypeError:  # an unhashable key: let the base class say so
                    continue
                if first != key_node.start_mark.line:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found the key {key!r} twice (first on line {first + 1})",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep)


def load_text(text: str, name: str = "<text>"):
    """The YAML document in `text`; errors name `name`."""
    stream = io.StringIO(text)
    stream.name = name  # what the parser's marks (an error's file and line) name
    loader = StrictLoader(stream)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_file(path: Path | str):
    """The YAML document in file `path` (errors name it, with the line)."""
    return load_text(Path(path).read_text(), str(path))


def json_loads(text: str, name: str = "<text>"):
    """JSON with every key once: a key given twice in an object is a ValueError naming it."""

    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise ValueError(f"{name}: the key {k!r} is given twice in one object")
            out[k] = v
        return out

    return json.loads(text, object_pairs_hook=pairs)
