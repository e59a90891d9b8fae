"""`scalestudy --version` names the code as outputs record it (issue 53)."""

import pytest

from scalestudy.cli import main
from scalestudy.measure.code_version import code_version, model_version


def test_version_prints_the_code_and_model_versions_and_exits_zero(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"{code_version()} ({model_version()})\n"
