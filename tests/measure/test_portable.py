import sys

from scalestudy.measure import portable


def test_paths_from_their_import_root():
    assert portable.portable_path("/x/.devsnap/src/scalestudy/harness/train.py") == "scalestudy/harness/train.py"
    assert portable.portable_path("/opt/v/lib/python3.12/site-packages/torch/nn/m.py") == "torch/nn/m.py"
    assert portable.portable_path("/a/b/c/d.py") == "c/d.py"
    assert portable.portable_path("<string>") == "<string>"


def test_traceback_names_no_absolute_path():
    try:
        portable.portable_path(None)  # type: ignore[arg-type]
    except AttributeError as e:
        text = portable.portable_traceback(e)
    assert 'File "scalestudy/measure/portable.py"' in text
    assert not any(f'"{p}/' in text for p in sys.path if p.startswith("/"))


def test_text_rewritten_line_by_line():
    tb = 'Traceback:\n  File "/w/src/scalestudy/x.py", line 1, in f\n    g()\nValueError: "/keep/this"'
    assert (
        portable.portable_text(tb)
        == 'Traceback:\n  File "scalestudy/x.py", line 1, in f\n    g()\nValueError: "/keep/this"'
    )
