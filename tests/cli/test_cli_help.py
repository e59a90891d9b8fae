"""Every option of every command explains itself; spec options are generated from the fields' doc()."""

import argparse
import subprocess
import sys
from dataclasses import fields

import pytest
from conftest import REPO

from scalestudy.cli import build_parser, main
from scalestudy.spec.collectives import CollectivesSpec
from scalestudy.spec.run import RunSpec, field_doc


def _commands(parser: argparse.ArgumentParser, path=("scalestudy",)):
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(build_parser()))


@pytest.mark.parametrize("cls", [RunSpec, CollectivesSpec])
def test_every_spec_field_is_documented(cls):
    for f in fields(cls):
        d = field_doc(f)
        assert d.meaning.strip(), f.name
        if str(f.type) in ("int", "float"):
            assert d.unit, f"{cls.__name__}.{f.name} has no unit"
        assert d.allowed, f"{cls.__name__}.{f.name} has no allowed values"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_has_meaning_unit_and_allowed_values(command):
    for a in COMMANDS[command]._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        name = "/".join(a.option_strings) or a.dest
        assert a.help and not a.help.startswith("default"), f"{command} {name}: no meaning"
        if a.type in (int, float):
            assert "unit: " in a.help and "allowed: " in a.help, f"{command} {name}: {a.help!r}"
        if a.choices is not None and not isinstance(a, argparse._SubParsersAction):
            assert len(a.choices) > 0


def test_spec_help_comes_from_the_field_doc(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "sharded data-parallel degree (FSDP2); -1: the processes left after dp_replicate, tp and pp" in out
    assert "[unit: ranks; allowed: -1 or >= 1;" in out
    assert "--device {cpu,cuda}" in out


def test_choices_are_checked_by_the_parser(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--precision", "fp16"])
    assert e.value.code == 2
    assert "invalid choice: 'fp16'" in capsys.readouterr().err


def test_a_multi_process_spec_without_torchrun_gets_one_sentence(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    assert main(["train", "--procs-per-node", "2", "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scalestudy train: the spec needs 2 processes: start it with torchrun --nproc_per_node 2")
    assert err.count("\n") == 1 and not (tmp_path / "r").exists()


def test_help_and_the_launchers_start_import_no_torch_pandas_or_matplotlib():
    # every run job starts `scalestudy launch`, which must stay light: torch is imported by the
    # run's workers (or a warm server), pandas and matplotlib by the analysis commands only
    code = (
        "import sys\n"
        "from scalestudy.cli import build_parser\n"
        "from scalestudy.launch import launcher, run_summary, warm_workers\n"
        "from scalestudy.spec.studies import load_study\n"
        "build_parser(); load_study('smoke')\n"
        "print(sorted(m for m in ('torch', 'pandas', 'matplotlib', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout[-300:] + out.stderr[-300:]


def test_a_malformed_catalog_file_leaves_help_working_and_stops_a_command_naming_it(tmp_path, monkeypatch, capsys):
    from scalestudy.spec import catalog

    bad = tmp_path / "mine.yaml"
    bad.write_text("gpus:\n  My GPU:\n    product: x\n")
    monkeypatch.setenv(catalog.ENV_VAR, str(bad))
    catalog.reset()
    try:
        with pytest.raises(SystemExit) as e:  # argparse exits 0 after printing the help
            main(["--help"])
        assert e.value.code == 0
        assert main(["study", "--study", "smoke", "--root", str(REPO)]) == 2
        err = capsys.readouterr().err
        assert "mine.yaml is not a valid catalog file" in err and "peak_tflops" in err
        assert len(err.splitlines()) < 12 and "Traceback" not in err
    finally:
        monkeypatch.delenv(catalog.ENV_VAR)
        catalog.reset()
