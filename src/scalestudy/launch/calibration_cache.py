"""The performance model's calibration (perfmodel.predict.calibrate) kept on disk between processes,
and the step times predicted with it by configuration (StepTimes), so that planning a study
(`scalestudy study`, the workflow's start: scalestudy.launch.cost) neither reads the traces again
nor predicts the same configuration twice. Planning's, not the model's: it lives in launch, so that
it is no part of the model's version (measure.code_version.model_version hashes perfmodel/).

    cal = load_calibration(["data/h200-reference/raw"], root)   # predict.calibrate's Calibration
    known = step_times(raw_dirs, cluster, root, options, calibration=calibration_digest(raw_dirs, root))

Key: what calibrate reads, without hashing a large file.
  - every run directory under the raw dirs that holds status.json (the runs read_measured_dir and
    read_gemm_rates read): the sha256 of its status.json, which records the sha256 of each of the
    run's files (files_sha256) under its seal, and the size and modification time of each file in
    the directory (a file changed without its status changing is read again, not trusted);
  - the model's code and inputs (model_fingerprint: what scalestudy.measure.code_version.model_version
    hashes, the perfmodel sources and the modules they import, the catalogs, the cluster files and
    the power measurements calibrate fits, and more), the cache format, Python's and scalestudy's
    versions;
  - the raw dirs as given and the resolved root (the calibration holds paths made of them).
A changed key recomputes the calibration and replaces the entry. One entry (file) per raw dirs and
root, `calibration-<16 hex>.pickle` under cache_dir(): `<root>/.snakemake/scalestudy-cache/` (git
ignores .snakemake/), or $SCALESTUDY_CACHE_DIR; SCALESTUDY_CACHE_DIR=off keeps nothing on disk.

An entry is a header (MAGIC, the key's sha256, the payload's sha256) and the pickled Calibration,
written atomically (measure.rawlog.atomic_write_bytes). An entry whose header, key or payload
digest does not match, or that cannot be read or unpickled, is recomputed and rewritten, never
used. The digests catch a torn or corrupted file; they do not make the directory a trust boundary
(pickle runs what it reads): it is this checkout's, written by the same user as its code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import sys
from pathlib import Path

import scalestudy
from scalestudy.measure.code_version import PACKAGE_DIR, model_inputs
from scalestudy.measure.rawlog import STATUS_FILE, atomic_write_bytes, find_runs
from scalestudy.spec.checkout import checkout_path

# perfmodel.predict (numpy, the whole model) is imported where a calibration is made or read: a plan
# whose step times are all kept (StepTimes) needs neither

CACHE_ENV = "SCALESTUDY_CACHE_DIR"
CACHE_SUBDIR = Path(".snakemake") / "scalestudy-cache"
FORMAT = "scalestudy.calibration-cache/1"
MAGIC = b"scalestudy-calibration-cache/1\n"
# the wings the model's code may come from: perfmodel and those below it (the `wings` contract of
# import-linter, pyproject.toml: perfmodel imports only measure and spec), the catalogs with them
MODEL_CODE = ("perfmodel", "measure", "spec")


def cache_dir(root: Path | str = ".") -> Path | None:
    """Where entries live: $SCALESTUDY_CACHE_DIR, else <root>/.snakemake/scalestudy-cache; None: off."""
    env = os.environ.get(CACHE_ENV)
    if env is not None and env.strip().lower() in ("off", "0", "no", "false"):
        return None
    return Path(env) if env else Path(root) / CACHE_SUBDIR


def model_fingerprint(root: Path | str = ".") -> str:
    """sha256 of every file of the wings the model's code comes from (MODEL_CODE, the package's
    __init__, this module: how entries are read) and of the checkout files model_version hashes
    (code_version.model_inputs(): the clusters, the external ledger, the matmul and power measurements the GPU catalog names). A
    superset of model_version's inputs, read as bytes: model_version follows the imports through
    every module's syntax tree, a tenth of a second that planning would pay on every call; this
    takes a few milliseconds."""
    h = hashlib.sha256()

    def add(files, base: Path) -> None:
        for f in files:
            h.update(f.relative_to(base).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")

    add([PACKAGE_DIR / "__init__.py", Path(__file__).resolve()], PACKAGE_DIR)
    for d in MODEL_CODE:
        add(
            sorted(
                f
                for f in (PACKAGE_DIR / d).rglob("*")
                if f.is_file() and f.suffix != ".pyc" and "__pycache__" not in f.parts
            ),
            PACKAGE_DIR,
        )
    for rel in model_inputs():
        try:
            p = checkout_path(rel, root)
        except FileNotFoundError:  # not in this checkout: its absence is part of the key
            h.update(f"missing {rel}\0".encode())
            continue
        base = p.parents[len(Path(rel).parts) - 1]
        add(sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p], base)
    return h.hexdigest()


def _as_list(raw_dirs) -> list[str]:
    if isinstance(raw_dirs, (str, Path)):
        raw_dirs = [raw_dirs]
    return [str(d) for d in raw_dirs]


def _root(root: Path | str) -> str:
    """The root as predict.cached_calibration hands it to calibrate: resolved."""
    return str(Path(root).resolve())


def _slot(raw_dirs: list[str], root: str) -> str:
    return hashlib.sha256(json.dumps([root, raw_dirs]).encode()).hexdigest()[:16]


def calibration_key(raw_dirs, root: Path | str = ".") -> dict:
    """What the calibration of `raw_dirs` depends on (see the module's docstring): status.json
    digests, file sizes and times, never a hash of a trace or a metrics file."""
    dirs, root = _as_list(raw_dirs), _root(root)
    runs = []
    for d in dirs:
        base = Path(root) / d
        for run_dir in find_runs(base):
            status = run_dir / STATUS_FILE
            if not status.is_file():
                continue
            files = []
            for f in sorted(run_dir.rglob("*")):
                if f.is_file():
                    st = f.stat()
                    files.append([f.relative_to(run_dir).as_posix(), st.st_size, st.st_mtime_ns])
            runs.append(
                [d, run_dir.relative_to(base).as_posix(), hashlib.sha256(status.read_bytes()).hexdigest(), files]
            )
    return {
        "format": FORMAT,
        "model": model_fingerprint(root),
        "python": list(sys.version_info[:2]),
        "scalestudy": scalestudy.__version__,
        "raw_dirs": dirs,
        "root": root,
        "runs": runs,
    }


def _digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def entry_path(raw_dirs, root: Path | str = ".", directory: Path | str | None = None) -> Path | None:
    """The entry file of `raw_dirs` under `root` (None: the cache is off)."""
    d = Path(directory) if directory is not None else cache_dir(root)
    return None if d is None else d / f"calibration-{_slot(_as_list(raw_dirs), _root(root))}.pickle"


def _read(path: Path, key_digest: str):
    """The entry's calibration, or None where it is missing, of another key, torn or unreadable."""
    from scalestudy.perfmodel.predict import Calibration

    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, _, rest = data.partition(b"\n")
    if head + b"\n" != MAGIC:
        return None
    key_line, _, rest = rest.partition(b"\n")
    sum_line, _, payload = rest.partition(b"\n")
    if key_line.decode("ascii", "replace") != key_digest:
        return None
    if sum_line.decode("ascii", "replace") != hashlib.sha256(payload).hexdigest():
        return None
    try:
        obj = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - whatever a damaged pickle raises, the entry is recomputed
        return None
    cal = obj.get("calibration") if isinstance(obj, dict) and obj.get("key_digest") == key_digest else None
    return cal if isinstance(cal, Calibration) else None


def _write(path: Path, key_digest: str, cal) -> None:
    payload = pickle.dumps({"key_digest": key_digest, "calibration": cal}, protocol=pickle.HIGHEST_PROTOCOL)
    data = MAGIC + key_digest.encode() + b"\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
    except OSError:  # a cache that cannot be written costs the next call the calibration, nothing more
        pass


def calibration_digest(raw_dirs, root: Path | str = ".") -> str | None:
    """The sha256 of calibration_key (None: the cache is off, SCALESTUDY_CACHE_DIR=off)."""
    if cache_dir(root) is None:
        return None
    return _digest(calibration_key(raw_dirs, root))


def load_calibration(
    raw_dirs, root: Path | str = ".", *, directory: Path | str | None = None, key_digest: str | None = None
):
    """predict.calibrate(raw_dirs, root) (root resolved, as predict.cached_calibration gives it), from
    the entry on disk where its key still holds; else calibrated and the entry (re)written.
    `directory`: in place of cache_dir(root); `key_digest`: calibration_digest's, where the caller
    has it already."""
    from scalestudy.perfmodel import predict

    dirs = _as_list(raw_dirs)
    path = entry_path(dirs, root, directory)
    if path is None:
        return predict.calibrate(dirs, _root(root))
    key_digest = key_digest or _digest(calibration_key(dirs, root))
    cal = _read(path, key_digest)
    if cal is None:
        cal = predict.calibrate(dirs, _root(root))
        _write(path, key_digest, cal)
    return cal


# ---- step times by configuration -------------------------------------------------------------
STEPS_FORMAT = "scalestudy.step-times-cache/1"


class StepTimes:
    """predict(spec, cluster, calibration, band=False)'s step_time_s by the spec's config_id (every
    field but the seed), for one calibration key, cluster and model options, kept on disk: the
    expected cost of a study (scalestudy.launch.cost) predicts each configuration once, and the
    next plan of the same study reads them. A JSON entry `steps-<16 hex>.json` beside the
    calibration's, with the sha256 of its values: one that does not check is ignored and rewritten.
    Without a calibration key (the cache off) nothing is read or written."""

    def __init__(self, path: Path | None, key_digest: str | None, values: dict[str, float] | None = None):
        self.path, self.key_digest = path, key_digest
        self.values: dict[str, float] = dict(values or {})
        self._changed = False

    def get(self, config_id: str) -> float | None:
        return self.values.get(config_id)

    def put(self, config_id: str, step_time_s: float) -> None:
        self.values[config_id] = float(step_time_s)
        self._changed = True

    def save(self) -> None:
        if self.path is None or not self._changed:
            return
        doc = {
            "format": STEPS_FORMAT,
            "key": self.key_digest,
            "values_sha256": _values_digest(self.values),
            "step_time_s": self.values,
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        except OSError:
            return
        self._changed = False


def _values_digest(values: dict[str, float]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def step_times_key(calibration: str, cluster, root: Path | str = ".", options=None) -> dict:
    """What a step time depends on besides its spec: the calibration (its key's digest, which covers the
    model's code and inputs), the cluster's values as loaded, the model options, and the raw logs a
    cluster with `collectives.fit: raw` fits its collectives to (collectives.CollectiveModel.for_cluster)."""
    coll = calibration_key(list(cluster.raw_dirs), root)["runs"] if cluster.collectives_fit == "raw" else []
    return {
        "format": STEPS_FORMAT,
        "calibration": calibration,
        "cluster": hashlib.sha256(json.dumps(cluster.as_dict(), sort_keys=True, default=str).encode()).hexdigest(),
        "options": None if options is None else options.as_dict(),
        "collective_runs": coll,
    }


def step_times(
    raw_dirs,
    cluster,
    root: Path | str = ".",
    options=None,
    *,
    calibration: str | None,
    directory: Path | str | None = None,
) -> StepTimes:
    """The step times kept for the calibration of `raw_dirs` (`calibration`: its key's digest,
    calibration_digest), `cluster` and `options`: empty where none are kept, or where the entry does
    not check. None as the digest: a memo of this process only."""
    d = Path(directory) if directory is not None else cache_dir(root)
    if calibration is None or d is None:
        return StepTimes(None, None)
    key_digest = _digest(step_times_key(calibration, cluster, root, options))
    opts = None if options is None else options.as_dict()
    slot = hashlib.sha256(
        json.dumps([_root(root), _as_list(raw_dirs), cluster.name, opts], sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    path = d / f"steps-{slot}.json"
    try:
        doc = json.loads(path.read_text())
        values = doc["step_time_s"]
        ok = (
            doc.get("format") == STEPS_FORMAT
            and doc.get("key") == key_digest
            and isinstance(values, dict)
            and all(
                isinstance(k, str) and isinstance(v, float) and math.isfinite(v) and v > 0 for k, v in values.items()
            )
            and doc.get("values_sha256") == _values_digest(values)
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        ok = False
    return StepTimes(path, key_digest, values if ok else None)
