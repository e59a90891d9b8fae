"""A run is from a dirty checkout when the code or configuration that decides it differs from the
commit; raw logs under data/ being remade (a study measured again in place) do not make it so."""

import subprocess

from scalestudy.spec.checkout import CODE_PATHS, git_state


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_dirty_covers_the_code_and_workflow_not_the_raw_logs(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    (tmp_path / "data" / "s" / "raw" / "r").mkdir(parents=True)
    (tmp_path / "data" / "s" / "raw" / "r" / "status.json").write_text("{}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    (tmp_path / "data" / "s" / "raw" / "r" / "status.json").unlink()  # to be measured again
    state = git_state(tmp_path / "src")
    assert state["dirty"] is False and len(state["commit"]) == 40 and state["dirty_scope"] == list(CODE_PATHS)
    (tmp_path / "src" / "m.py").write_text("x = 2\n")
    assert git_state(tmp_path / "src")["dirty"] is True


def test_no_checkout_says_why(tmp_path):
    state = git_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is None and state["reason"]
