"""The raw-log format of one run, written by the harness and read by the analysis side.

A run directory holds:
  run.json        the spec and its provenance (written at start, end time added at the end)
  metrics.jsonl   one JSON record a line: {"key", "value", "metadata"} (MLPerf-logging style)
  status.json     the final status, written last: a directory without it is incomplete
  rank-NNNNN.jsonl / rank-NNNNN.status.json   per-rank files while the run is in flight;
                  merged into metrics.jsonl and status.json when the last rank finishes
and optionally traces/ (profiler traces) and other artefacts listed with checksums in status.json.

Pure Python: no torch import, so that a laptop can read and audit raw logs.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import math
import os
import shutil
import stat
import tempfile
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

SCHEMA = "scalestudy.rawlog/1"
RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
STATUS_FILE = "status.json"
LOCK_FILE = ".finalize.lock"

# diverged: the loss was not finite or left its sane band; invalid: a step time was not a positive
# finite number (scalestudy.harness.faults.check_step); status.json's `step` says where
STATUSES = ("ok", "oom", "timeout", "preempted", "crashed", "comm_error", "invalid_config", "diverged", "invalid")
# When ranks disagree, the run's status is the most telling one: a peer's comm_error is
# usually the echo of another rank's oom or crash.
STATUS_PRIORITY = (
    "invalid_config",
    "oom",
    "crashed",
    "diverged",
    "invalid",
    "timeout",
    "preempted",
    "comm_error",
    "ok",
)


# The identity of a launched run beyond its spec: the study that planned it and that study's hardware
# line. `scalestudy launch --study` passes them to the processes it starts (JSON in IDENTITY_ENV);
# run.json records them (null for a run started outside a study), and the aggregation refuses a run
# whose study or hardware differs from the study it is read for (analysis.aggregate.identity_problem).
IDENTITY_ENV = "SCALESTUDY_RUN_IDENTITY"
IDENTITY_KEYS = ("study", "hardware")


def identity_env(study: str | None, hardware: str | None) -> str:
    """The IDENTITY_ENV value naming a run's study and hardware (JSON)."""
    return json.dumps({"study": study, "hardware": hardware}, sort_keys=True)


def identity_from_env(env: dict | None = None) -> dict:
    """{"study": ..., "hardware": ...} from IDENTITY_ENV (each None where not given)."""
    text = (os.environ if env is None else env).get(IDENTITY_ENV) or "{}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = {}
    data = data if isinstance(data, dict) else {}
    return {k: (None if data.get(k) is None else str(data[k])) for k in IDENTITY_KEYS}


# Switches that weaken a check or change what a run measures. A run records those set in its
# environment (run.json `overrides`); the analysis names them wherever the run's numbers appear, and
# `scalestudy audit --strict` refuses such a run, as it does one made from an uncommitted checkout.
OVERRIDE_ENVS = {
    "SCALESTUDY_FOREIGN_CPU_MAX": "the run guard's foreign-CPU threshold",
    "SCALESTUDY_HARNESS_OFF": "harness optimisations switched off",
    "SCALESTUDY_INJECT_FAULT": "a fault injected by a test",
}
FOREIGN_CPU_SHARE_DEFAULT = 0.10  # launch.run_guard.FOREIGN_CPU_SHARE_MAX: why a tenth is said there


def overrides_from_env(env: Mapping[str, str] | None = None) -> dict:
    """The OVERRIDE_ENVS set (non-empty) in the environment: run.json's `overrides`."""
    env = os.environ if env is None else env
    return {k: str(env[k]) for k in OVERRIDE_ENVS if str(env.get(k, "")).strip()}


def weakened_checks(run: dict, status: dict) -> list[str]:
    """Why a run's numbers were measured with a check weakened, one sentence each (empty: none): a
    switch of OVERRIDE_ENVS, the CPU run guard's threshold off or above the default (status.json's
    `load`, for runs that predate `overrides`), an uncommitted checkout."""
    out = [f"{k}={v} ({OVERRIDE_ENVS.get(k, 'an override')})" for k, v in sorted((run.get("overrides") or {}).items())]
    cpu = (status.get("load") or {}).get("foreign_cpu") or {}
    if (
        "SCALESTUDY_FOREIGN_CPU_MAX" not in (run.get("overrides") or {})
        and (run.get("spec") or {}).get("device") == "cpu"
    ):
        if "threshold" in cpu and cpu["threshold"] is None:
            out.append("the run guard's foreign-CPU check was off")
        elif isinstance(cpu.get("threshold"), (int, float)) and cpu["threshold"] > FOREIGN_CPU_SHARE_DEFAULT:
            out.append(f"the run guard's foreign-CPU threshold was raised to {cpu['threshold']:.0%}")
    git = ((run.get("provenance") or {}).get("package") or {}).get("git") or {}
    if git.get("dirty"):
        out.append(f"made from a checkout with uncommitted changes (commit {str(git.get('commit'))[:12]})")
    return out


class RawLogError(Exception):
    """A raw-log problem, naming the file."""

    def __init__(self, path: os.PathLike | str, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class IncompleteRunError(RawLogError):
    """A run whose raw log is not all there (no status.json: it did not finish; a file missing)."""

    pass


class CorruptLogError(RawLogError):
    """A raw-log file that is damaged or breaks the format (its JSON, checksum, seal or content)."""

    pass


# ---- writing -----------------------------------------------------------------------
_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)


def free_space_note(path: os.PathLike | str) -> str:
    """'N bytes free on the file system of PATH' (of its nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return f"{shutil.disk_usage(p).free} bytes free on the file system of {p}"
    except OSError:
        return f"the free space of {p} is unknown"


def disk_error(e: OSError, path: os.PathLike | str) -> OSError:
    """An OSError from writing `path`, saying which path and how much room is left (same errno)."""
    what = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exhausted",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EIO: "an input/output error",
    }.get(e.errno, e.strerror)  # type: ignore[arg-type]  # an OSError from the file system has an errno
    return OSError(e.errno, f"cannot write {path}: {what} ({free_space_note(path)})")


def atomic_write_bytes(path: os.PathLike | str, data: bytes) -> None:
    """Write `data` to `path` through a synced temporary file renamed over it: never half written."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        if e.errno in _DISK_ERRNOS:
            raise disk_error(e, path) from None
        raise
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in _DISK_ERRNOS:
            raise disk_error(e, path) from None
        raise


@contextmanager
def atomic_output(path: os.PathLike | str) -> Iterator[Path]:
    """A temporary name beside `path` for a writer that takes a file name (a figure's savefig):
    renamed to `path` when the block ends, removed if it raises, so that `path` is never seen half
    written (an interrupted figure rule leaves the old file or none)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(path: os.PathLike | str, text: str) -> None:
    """atomic_write_bytes of `text`, UTF-8."""
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: os.PathLike | str, obj: Any) -> None:
    """atomic_write_text of `obj` as indented JSON with sorted keys."""
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


SEAL_KEY = "seal"


def seal_digest(status: dict) -> str:
    """sha256 of status.json's content without its seal (canonical JSON: sorted keys, no spaces)."""
    body = {k: v for k, v in status.items() if k != SEAL_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_status(path: os.PathLike | str, status: dict) -> None:
    """Write a run's status.json sealed: its `seal` is the sha256 of the rest of its content, so
    that an edit of the status (one word: ok <-> oom) fails the audit like an edit of the metrics."""
    atomic_write_json(path, {**status, SEAL_KEY: seal_digest(status)})


def seal_problem(status: dict) -> str | None:
    """Why a status.json's seal does not hold (None: it holds)."""
    if SEAL_KEY not in status:
        return "not sealed (no 'seal': written by hand or by a harness before sealing)"
    if status[SEAL_KEY] != seal_digest(status):
        return "edited after the run: its seal (the sha256 of its content) no longer matches"
    return None


def step_problem(
    step, loss: float | None, step_time_s, band: tuple[float, float] | None = None
) -> tuple[str, str] | None:
    """Why one step is no measurement of training, as (status, sentence): `invalid` for a step time
    that is not a positive finite number, `diverged` for a loss (None: not checked) that is not
    finite or lies outside `band`; None for a sound step. The harness stops a run on it
    (harness.faults.check_step) and the reader refuses an `ok` log that holds such a step."""
    if not (isinstance(step_time_s, (int, float)) and math.isfinite(step_time_s) and step_time_s > 0):
        return "invalid", f"step {step} has step time {step_time_s!r} s (not a positive finite number)"
    if loss is None:
        return None
    if not math.isfinite(loss):
        return "diverged", f"step {step} has loss {loss!r} (not finite)"
    if band is not None and not band[0] <= loss <= band[1]:
        return "diverged", f"step {step} has loss {loss:.6g}, outside the sane band [{band[0]:g}, {band[1]:.4g}]"
    return None


# An iteration record's phases, in the order a run goes through them; `beyond_window`: steps an
# imported log holds after its measured window (measure.mlperf_import), never counted.
PHASES = ("warmup", "measured", "beyond_window")


def step_problems(spec: dict, records: list[dict]) -> list[str]:
    """Where a finished run's iteration records are not the steps its spec plans: on every rank
    exactly `warmup_iters` warm-up and `measured_iters` measured steps, each step number once and
    in increasing order, phases in order, and the same steps on every rank that logs steps."""
    planned = {"warmup": spec.get("warmup_iters"), "measured": spec.get("measured_iters")}
    by_rank: dict[Any, list[tuple[str, Any]]] = {}
    for r in records:
        v = r.get("value")
        if r.get("key") == "iteration" and isinstance(v, dict):
            rank = (r.get("metadata") or {}).get("rank", 0)
            by_rank.setdefault(rank, []).append((v.get("phase"), v.get("step")))  # type: ignore[arg-type]  # phase and step of a step event
    if not by_rank and isinstance(planned["measured"], int) and planned["measured"] > 0:
        return [f"the metrics hold 0 of {planned['measured']} measured steps"]
    first: tuple[Any, tuple] | None = None
    for rank, seq in sorted(by_rank.items(), key=lambda kv: str(kv[0])):
        unknown = sorted({str(p) for p, _ in seq if p not in PHASES})
        if unknown:
            return [f"rank {rank} logs steps of unknown phase {unknown[0]!r}"]
        seen: set = set()
        for (p0, s0), (p1, s1) in zip(seq, seq[1:]):
            if PHASES.index(p1) < PHASES.index(p0):
                return [f"rank {rank} logs {p1} step {s1} after {p0} step {s0}"]
        for _, step in seq:
            if step in seen:
                return [f"rank {rank} logs step {step} more than once"]
            seen.add(step)
        steps = [s for _, s in seq]
        if not all(isinstance(s, int) for s in steps) or steps != sorted(steps):
            return [
                f"rank {rank} logs its steps out of order ({', '.join(map(str, steps[:8]))}"
                f"{', ...' if len(steps) > 8 else ''})"
            ]
        for phase, want in planned.items():
            n = sum(1 for p, _ in seq if p == phase)
            if isinstance(want, int) and n != want:
                return [
                    f"rank {rank} holds {n} of {want} {phase} steps"
                    + (" (more than the spec plans)" if n > want else "")
                ]
        if first is None:
            first = (rank, tuple(seq))
        elif tuple(seq) != first[1]:
            return [f"ranks {first[0]} and {rank} disagree on the steps they logged"]
    return []


def status_contradictions(run: dict, status: dict, records: list[dict]) -> list[str]:
    """Where a training run's status contradicts its metrics: `ok` with other steps than the spec
    plans (step_problems), or `oom` / `invalid_config` with every measured step and no error."""
    if run.get("kind", "train") != "train":
        return []
    spec = run.get("spec") or {}
    planned = spec.get("measured_iters")
    if not isinstance(planned, int):
        return []
    steps = {
        r["value"].get("step")
        for r in records
        if r.get("key") == "iteration" and isinstance(r.get("value"), dict) and r["value"].get("phase") == "measured"
    }
    errors = [r for r in records if r.get("key") == "error"]
    s = status.get("status")
    if s == "ok":
        problems = step_problems(spec, records)
        if problems:
            return [
                f"status ok, but {problems[0]}"
            ]  # a run that proves it trained (harness.faults.check_step): what it checks, checked again
        fake = (run.get("spec") or {}).get("comm") == "fake"  # no data moves: its loss is no training loss
        for r in records:
            v = r.get("value")
            if r.get("key") != "iteration" or not isinstance(v, dict) or v.get("phase") != "measured":
                continue
            t, loss = v.get("step_time_s"), v.get("loss")
            if not isinstance(t, (int, float)):
                continue
            problem = step_problem(v.get("step"), None if fake or not isinstance(loss, (int, float)) else loss, t)
            if problem:
                kind, why = problem
                return [
                    f"status ok, but {why}: "
                    + ("a run that diverged" if kind == "diverged" else "an invalid measurement")
                ]
    if s in ("oom", "invalid_config") and len(steps) >= planned and not errors:
        return [f"status {s}, but the metrics hold every measured step ({planned}) and no error"]
    return []


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_regular(path: os.PathLike | str, root: os.PathLike | str | None = None) -> None:
    """Refuse, naming it, a raw-log file that is not a plain file (a FIFO would hang the reader, a
    device or directory is no log) or that is a symbolic link out of `root` (its run directory):
    checked with lstat/stat before anything opens it. A missing file passes (callers report it)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        if root is not None and not _inside(target, os.path.realpath(root)):
            raise CorruptLogError(path, f"a symbolic link out of its run directory (to {target}): not read")
        try:
            st = os.stat(path)
        except OSError:
            raise CorruptLogError(path, f"a dangling symbolic link (to {target}): not read") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((what for test, what in _KINDS if test(st.st_mode)), "not a plain file")
        raise CorruptLogError(path, f"not a regular file ({kind}): not read")


def sha256_file(path: os.PathLike | str, root: os.PathLike | str | None = None) -> str:
    """The sha256 hex digest of the file at `path` (checked by check_regular first)."""
    check_regular(path, root)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def member_path(run_dir: os.PathLike | str, rel: str) -> Path:
    """A run's file, or its gzipped form (committed datasets keep metrics.jsonl compressed)."""
    p = Path(run_dir) / rel
    gz = p.with_name(p.name + ".gz")
    return gz if not p.exists() and gz.exists() else p


def read_member_bytes(run_dir: os.PathLike | str, rel: str) -> bytes:
    """A run's file (decompressed where it is stored gzipped); a file that is not a plain file in
    the run directory, or a damaged gzip, raises CorruptLogError naming it."""
    p = member_path(run_dir, rel)
    check_regular(p, run_dir)
    data = p.read_bytes()
    if p.name.endswith(".gz") and not rel.endswith(".gz"):
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise CorruptLogError(
                p, f"a damaged gzip file (truncated or corrupt: {e}); restore it from the repository or rerun the run"
            ) from None
    return data


def member_sha256(run_dir: os.PathLike | str, rel: str) -> str | None:
    """sha256 of a listed file's content (decompressed if it is stored gzipped); None if missing.
    Raises CorruptLogError naming a damaged or non-plain file (check_regular)."""
    p = member_path(run_dir, rel)
    check_regular(p, run_dir)
    if not p.exists():
        return None
    return hashlib.sha256(read_member_bytes(run_dir, rel)).hexdigest()


def compress_run(run_dir: os.PathLike | str, names: Iterable[str] = (METRICS_FILE,)) -> None:
    """Gzip a finished run's large text files in place (deterministic: no name, mtime 0);
    status.json's checksums still hold, for the decompressed content."""
    for name in names:
        p = Path(run_dir) / name
        if p.exists():
            atomic_write_bytes(p.with_name(p.name + ".gz"), gzip.compress(p.read_bytes(), 9, mtime=0))
            p.unlink()


def rank_metrics_file(rank: int) -> str:
    """The file name of a rank's metrics records."""
    return f"rank-{rank:05d}.jsonl"


def rank_status_file(rank: int) -> str:
    """The file name of a rank's status."""
    return f"rank-{rank:05d}.status.json"


def record(key: str, value: Any, **metadata: Any) -> dict:
    """A metrics record: key, value and metadata."""
    return {"key": key, "value": value, "metadata": metadata}


class RankLog:
    """One rank's stream of records. Lines are flushed as written, so a crash keeps them."""

    def __init__(self, run_dir: os.PathLike | str, rank: int, run_id: str):
        self.run_dir = Path(run_dir)
        self.rank = rank
        self.run_id = run_id
        self.path = self.run_dir / rank_metrics_file(rank)
        self._f = open(self.path, "a", buffering=1)

    def log(self, key: str, value: Any, **metadata: Any) -> None:
        meta = {"rank": self.rank, "run_id": self.run_id, "time_unix": round(time.time(), 6), **metadata}
        try:
            self._f.write(json.dumps(record(key, value, **meta), sort_keys=True) + "\n")
        except OSError as e:
            if e.errno in _DISK_ERRNOS:
                raise disk_error(e, self.path) from None
            raise

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def write_status(self, status: str, error: str | None = None, **extra: Any) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        self.close()
        atomic_write_json(
            self.run_dir / rank_status_file(self.rank), {"rank": self.rank, "status": status, "error": error, **extra}
        )


def combine_statuses(statuses: Iterable[str]) -> str:
    """A run's status from its ranks' statuses: the first in STATUS_PRIORITY."""
    statuses = list(statuses)
    for s in STATUS_PRIORITY:
        if s in statuses:
            return s
    raise ValueError("no rank statuses")


def try_finalize(
    run_dir: os.PathLike | str,
    world_size: int,
    *,
    force: bool = False,
    missing_status: str = "crashed",
    missing_reason: str | None = None,
) -> bool:
    """Merge the per-rank files into metrics.jsonl and write status.json.

    Called by every rank after it has written its status; the last one (all statuses present)
    does the work, under an exclusive lock file. With force=True (the launcher, after the
    processes have ended) ranks without a status count as `missing_status`.
    Returns True if this call wrote status.json.
    """
    run_dir = Path(run_dir)
    if (run_dir / STATUS_FILE).exists():
        return False
    ranks: dict[int, dict] = {}
    for r in range(world_size):
        p = run_dir / rank_status_file(r)
        if p.exists():
            ranks[r] = json.loads(p.read_text())
    if len(ranks) < world_size and not force:
        return False
    try:
        fd = os.open(run_dir / LOCK_FILE, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    missing = [r for r in range(world_size) if r not in ranks]
    for r in missing:
        ranks[r] = {
            "rank": r,
            "status": missing_status,
            "error": missing_reason or "the process ended without writing its status",
        }
    # A rank that died without a word is the culprit: the others' statuses (a SIGTERM from the
    # launcher, a lost peer) are consequences of it.
    status = missing_status if missing else combine_statuses(s["status"] for s in ranks.values())
    culprits = missing or sorted(r for r, s in ranks.items() if s["status"] == status)
    error = ranks[culprits[0]].get("error") if status != "ok" else None
    at_step = ranks[culprits[0]].get("step") if status != "ok" else None  # diverged, invalid: where

    lines: list[tuple[tuple, str]] = []
    for r in range(world_size):
        p = run_dir / rank_metrics_file(r)
        if not p.exists():
            continue
        for i, line in enumerate(p.read_text().splitlines()):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                (run_dir / LOCK_FILE).unlink(missing_ok=True)
                raise CorruptLogError(
                    p, f"line {i + 1} is cut short or not JSON (a full disk? {free_space_note(p)})"
                ) from None
            step = rec["value"].get("step", -1) if isinstance(rec["value"], dict) else -1
            lines.append(((rec["metadata"].get("time_unix", 0.0) if step == -1 else 0.0, step, r, i), line))
    lines.sort(key=lambda t: t[0])
    atomic_write_text(run_dir / METRICS_FILE, "".join(line + "\n" for _, line in lines))

    run_json = run_dir / RUN_FILE
    if run_json.exists():
        run = json.loads(run_json.read_text())
        run["end_time_unix"] = round(time.time(), 3)
        atomic_write_json(run_json, run)

    files = {}
    for p in sorted(run_dir.rglob("*")):
        rel = p.relative_to(run_dir).as_posix()
        if (
            p.is_file()
            and rel not in (STATUS_FILE, LOCK_FILE)
            and not rel.startswith("rank-")
            and not p.name.startswith(".")
        ):
            files[rel] = sha256_file(p)
    write_status(
        run_dir / STATUS_FILE,
        {
            "schema": SCHEMA,
            "status": status,
            "error": error,
            "culprit_ranks": culprits,
            "ranks": [ranks[r] for r in range(world_size)],
            "files_sha256": files,
            **({"step": at_step} if at_step is not None else {}),
        },
    )
    for r in range(world_size):
        for name in (rank_metrics_file(r), rank_status_file(r)):
            (run_dir / name).unlink(missing_ok=True)
    (run_dir / LOCK_FILE).unlink(missing_ok=True)
    return True


# ---- reading -----------------------------------------------------------------------
@dataclass
class RunLog:
    """A run's raw log as read: run.json, status.json and the ranks' records."""

    path: Path
    run: dict
    status: dict
    records: list[dict] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.run["run_id"]

    @property
    def spec(self) -> dict:
        return self.run["spec"]

    def iterations(self, phase: str | None = None) -> Iterator[dict]:
        for r in self.records:
            if r["key"] == "iteration" and (phase is None or r["value"]["phase"] == phase):
                yield r


def _read_json(path: Path, root: Path | None = None) -> dict:
    check_regular(path, root if root is not None else path.parent)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CorruptLogError(path, f"not valid JSON ({e})") from None
    except UnicodeDecodeError as e:
        raise CorruptLogError(path, f"not text (byte {e.start} is not UTF-8)") from None
    if not isinstance(data, dict):
        raise CorruptLogError(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def read_json_file(path: os.PathLike | str, root: os.PathLike | str | None = None) -> dict:
    """A run's JSON file (run.json, status.json) as a dict; raises CorruptLogError naming it when it
    is not a plain file of its run directory or not a JSON object."""
    path = Path(path)
    return _read_json(path, Path(root) if root is not None else None)


def read_run(run_dir: os.PathLike | str, *, verify_checksums: bool = True) -> RunLog:
    """Read one complete run directory; raise naming the file if it is incomplete or corrupt."""
    run_dir = Path(run_dir)
    if run_dir.is_symlink():
        raise CorruptLogError(
            run_dir,
            f"a symbolic link (to {os.path.realpath(run_dir)}): a run directory is read "
            "where it lies, never through a link",
        )
    status_path = run_dir / STATUS_FILE
    if not status_path.exists():
        raise IncompleteRunError(run_dir, "no status.json: the run did not finish")
    status = _read_json(status_path)
    if status.get("status") not in STATUSES:
        raise CorruptLogError(status_path, f"unknown status {status.get('status')!r}")
    run_path = run_dir / RUN_FILE
    if not run_path.exists():
        raise IncompleteRunError(run_path, "missing")
    run = _read_json(run_path)
    for key in ("run_id", "spec", "provenance"):
        if key not in run:
            raise CorruptLogError(run_path, f"no {key!r}")
    for rel in status.get("files_sha256") or {}:  # never open a FIFO or follow a link out of the run
        check_regular(member_path(run_dir, rel), run_dir)
    if verify_checksums:
        broken = seal_problem(status)
        if broken:
            raise CorruptLogError(status_path, broken)
        for rel, digest in status.get("files_sha256", {}).items():
            p = member_path(run_dir, rel)
            now = member_sha256(run_dir, rel)
            if now is None:
                raise CorruptLogError(p, "listed in status.json but missing")
            if now != digest:
                raise CorruptLogError(p, "sha256 differs from the one recorded in status.json")
    records = []
    metrics_path = member_path(run_dir, METRICS_FILE)
    if metrics_path.exists():
        try:
            text = read_member_bytes(run_dir, METRICS_FILE).decode()
        except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
            raise CorruptLogError(metrics_path, f"unreadable ({e})") from None
        for lineno, line in enumerate(text.splitlines(), 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorruptLogError(metrics_path, f"line {lineno} is not valid JSON ({e})") from None
            if not isinstance(rec, dict) or not {"key", "value", "metadata"} <= rec.keys():
                raise CorruptLogError(metrics_path, f"line {lineno} lacks key, value or metadata")
            records.append(rec)
    elif status["status"] == "ok":
        raise IncompleteRunError(metrics_path, "missing from a run with status ok")
    for rec in records:  # a trace the analysis will open
        if rec.get("key") == "profile" and isinstance(rec.get("value"), dict) and rec["value"].get("trace_file"):
            check_regular(run_dir / str(rec["value"]["trace_file"]), run_dir)
    for c in status_contradictions(run, status, records):
        raise CorruptLogError(status_path, f"contradicts the metrics: {c}")
    return RunLog(path=run_dir, run=run, status=status, records=records)


def find_runs(raw_root: os.PathLike | str) -> list[Path]:
    """Every run directory under raw_root (complete or not): those holding run.json or rank files."""
    root = Path(raw_root)
    out = set()
    for p in root.rglob(RUN_FILE):
        out.add(p.parent)
    for p in root.rglob("rank-*.jsonl"):
        out.add(p.parent)
    return sorted(out)
