"""benchmarks/ holds yardsticks against other systems; a run whose raw log may decide a number is
made by the package's launcher, never by a script here starting the harness or writing a log."""

import re

from conftest import REPO

# starting the harness itself (`scalestudy train`/`collectives`/`gemm`/`instrument` as a command), or
# writing, sealing or compressing a raw log through measure.rawlog
FORBIDDEN = re.compile(
    r"""["']scalestudy["'],\s*["'](train|collectives|gemm|instrument)["']"""
    r"""|scalestudy (train|collectives|gemm|instrument)\b"""
    r"""|rawlog\.(atomic_write\w*|try_finalize|compress_run|seal\w*|write\w*)\("""
)


def test_no_benchmark_starts_the_harness_or_writes_a_raw_log():
    offenders = []
    for path in sorted((REPO / "benchmarks").iterdir()):
        if path.suffix in (".py", ".sh"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if FORBIDDEN.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_pattern_catches_what_it_names():
    assert FORBIDDEN.search('cmd = [sys.executable, "-m", "scalestudy", "train", "--spec", f]')
    assert FORBIDDEN.search("timeout 240 python3 -m scalestudy train --run-dir x")
    assert FORBIDDEN.search("rawlog.try_finalize(d, 1)")
    assert FORBIDDEN.search("subprocess.run(['scalestudy', 'instrument', 'power-duty'])")
    assert not FORBIDDEN.search('cmd = [sys.executable, "-m", "scalestudy", "launch", "--spec-json", f]')
