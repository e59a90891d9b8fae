"""environment.yml (conda, clusters) and pyproject.toml name the same dependencies."""

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {_name(r): r for r in project["dependencies"] + project["optional-dependencies"]["test"]}
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = {_name(r): r.replace(" ", "") for r in pip if not r.startswith("-e")}
    assert set(listed) == set(wanted)
    for name, req in wanted.items():
        assert listed[name] == req.replace(" ", ""), f"{name}: {listed[name]} vs {req}"


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    assert "make test" in ci and "make test" in readme


def test_the_lock_pins_every_dependency_within_its_range():
    """requirements-lock.txt (the Makefile's pip constraints) pins every package pyproject.toml
    names, except torch (the Makefile's TORCH_SPEC), at a version its range allows."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lock = {}
    for line in (REPO / "requirements-lock.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version.strip(), f"requirements-lock.txt: {line!r} is not NAME==VERSION"
            lock[_name(name)] = Version(version.strip())
    for text in project["dependencies"] + project["optional-dependencies"]["test"]:
        req = Requirement(text)
        name = _name(req.name)
        if name == "torch":
            assert name not in lock
            continue
        assert name in lock, f"{name} is missing from requirements-lock.txt"
        assert req.specifier.contains(lock[name], prereleases=True), f"{name}=={lock[name]} is outside {req}"
    makefile = (REPO / "Makefile").read_text()
    assert "LOCK ?= requirements-lock.txt" in makefile and "-c $(LOCK)" in makefile
    assert "TORCH_SPEC ?= torch==2.13.0\n" in makefile
