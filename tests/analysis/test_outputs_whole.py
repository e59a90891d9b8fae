"""Outputs written whole (issue 54): a figure, table or claims file is written to a temporary name
and renamed, so that an interrupted write leaves the old file or none, never a half-written one
that looks finished."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from scalestudy.analysis.figures import save  # noqa: E402
from scalestudy.measure import csv_format, rawlog  # noqa: E402


def test_an_interrupted_savefig_leaves_no_file_and_no_temporary(tmp_path, monkeypatch):
    fig = plt.figure()
    base = tmp_path / "weak_scaling"

    def dies_midway(self, fname, **kw):
        with open(fname, "wb") as f:
            f.write(b"%PDF-1.4 half")
        raise KeyboardInterrupt  # kill during the draw

    monkeypatch.setattr(type(fig), "savefig", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        save.save(fig, base, ["pdf"])
    assert list(tmp_path.iterdir()) == []


def test_a_previous_figure_stays_whole_when_the_next_write_is_interrupted(tmp_path, monkeypatch):
    fig = plt.figure()
    base = tmp_path / "weak_scaling"
    (pdf,) = save.save(fig, base, ["pdf"])
    before = pdf.read_bytes()
    assert before.startswith(b"%PDF")
    monkeypatch.setattr(type(fig), "savefig", lambda self, fname, **kw: (_ for _ in ()).throw(OSError("disk")))
    with pytest.raises(OSError):
        save.save(fig, base, ["pdf"])
    assert pdf.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [pdf.name]
    plt.close(fig)


def test_a_csv_is_replaced_in_one_step(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    csv_format.write_csv(path, ["a"], [{"a": 1}])
    monkeypatch.setattr(rawlog.os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        csv_format.write_csv(path, ["a"], [{"a": 2}])
    assert path.read_text() == "a\n1\n" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]
