"""Audit a study: do its tables, figure CSVs and claims follow from its raw logs, byte for byte?

`audit(study)` returns a list of problems, each naming a file (empty: all is well):
1. every status.json's seal (the sha256 of its content: an edited status) and every checksum it
   lists are recomputed (a missing or changed raw-log file); for a
   predicted run (scalestudy.perfmodel), also those of the measured runs it was calibrated from, as
   the prediction recorded them (a changed calibration file makes the prediction stale);
2. run directories under raw/ that the study did not plan, and copies of planned runs anywhere but
   raw/RUN_ID (backups, duplicates: never read); an unfinished attempt of a planned run that the
   harness moved aside is not a problem, nor a run the study retired (`retired_runs`: committed
   before the grid changed; a retired run whose directory is gone is); a status that contradicts
   its metrics (ok with fewer measured steps than planned, oom with every step and no error) fails
   the rebuild;
3. the tables, claims and every figure's CSV are rebuilt from the raw logs into a temporary
   directory and compared byte for byte with the ones in data/<study>/tables (tables) and
   figures/<study> (figure CSVs, claims.csv, claims.md); a missing file or a different one is a problem;
4. every figure's PDF and PNG is drawn again from its rebuilt CSV data by this code and compared byte
   for byte (rendering is deterministic: fixed metadata without dates, matplotlib's own fonts, the
   pinned matplotlib of requirements-lock.txt): a stale, swapped or edited image is a problem naming it.
   `manifest` (scalestudy audit --manifest FILE) receives the sha256 of every output that matched.
5. a damaged raw-log file (a truncated or corrupt gzip, a FIFO, a symbolic link out of its run
   directory) is a problem naming it; nothing hangs on it and nothing is read through it.
6. with `strict` (what CI runs on the committed studies), a run made with a check weakened
   (measure.rawlog.weakened_checks: an override switch, the run guard off, an uncommitted checkout).
"""

from __future__ import annotations

import io
import re
import shutil
import tempfile
import zlib
from pathlib import Path

from scalestudy.analysis import aggregate as agg
from scalestudy.analysis import claims as claims_mod
from scalestudy.analysis import rank_shares
from scalestudy.analysis.aggregate import C3_TERMS_FILE, CLAIM_BASIS_FILE, MODEL_BESIDE_FILE, SENSITIVITY_FILE
from scalestudy.analysis.figures import FIGURES, LEDGER_FIGURES, render
from scalestudy.analysis.provenance import calibration_provenance, measured_files_provenance
from scalestudy.measure.code_version import ledger_figure_version, model_version
from scalestudy.measure.csv_format import read_csv_rows, read_table, split_list
from scalestudy.measure.rawlog import (
    STATUS_FILE,
    RawLogError,
    find_runs,
    member_path,
    member_sha256,
    read_json_file,
    seal_problem,
    sha256_file,
)
from scalestudy.spec.studies import RANK_FIGURES


def _first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb), start=1):
        if x != y:
            return f"first difference at line {i}"
    return f"{len(la)} lines against {len(lb)} expected"


def compare(expected: Path, actual: Path) -> str | None:
    """A problem naming `actual` if it is missing or its bytes differ from `expected`."""
    if not actual.exists():
        return f"{actual}: missing (the raw logs give {expected.name})"
    a, e = actual.read_bytes(), expected.read_bytes()
    if a != e:
        return f"{actual}: differs from what the raw logs give ({_first_difference(a, e)})"
    return None


def verify_checksums(raw_dir: Path) -> list[str]:
    problems = []
    for d in find_runs(raw_dir) if raw_dir.is_dir() else []:
        status_path = d / STATUS_FILE
        if not status_path.exists():
            continue  # an incomplete directory: reported by the rebuild (planned) or as unplanned
        try:
            status = read_json_file(status_path, d)
        except RawLogError as e:  # not JSON, a FIFO, a link out of the run
            problems.append(str(e))
            continue
        broken = seal_problem(status)
        if broken:
            problems.append(f"{status_path}: {broken}")
        files = status.get("files_sha256")
        if not isinstance(files, dict) or not files:
            problems.append(f"{status_path}: lists no files with their sha256")
            continue
        for rel, digest in sorted(files.items()):
            p = member_path(d, rel)
            try:
                now = member_sha256(d, rel)
            except RawLogError as e:  # a damaged gzip, a FIFO, a link out of the run: named, never opened
                problems.append(str(e))
                continue
            if now is None:
                problems.append(f"{p}: listed in status.json but missing")
            elif now != digest:
                problems.append(f"{p}: sha256 differs from the one recorded in {status_path}")
        problems.extend(_calibration_problems(d))
    return problems


def _import_sources(study) -> list[str]:
    """Every run of a study of imported logs names, in its run.json, a source the study lists
    (repository and commit of its `imported` section)."""
    sources = {(s["repository"], s["commit"]) for s in getattr(study, "imported", ()) or ()}
    if not sources:
        return []
    problems = []
    for run_id in study.run_ids:
        p = Path(study.raw_dir) / run_id / "run.json"
        try:
            src = (read_json_file(p).get("provenance") or {}).get("source") or {}
        except (OSError, RawLogError):
            continue  # missing or unreadable: reported by the checksums and the rebuild
        if (src.get("repository"), src.get("commit")) not in sources:
            problems.append(
                f"{p}: imported from {src.get('repository')}@{src.get('commit')}, not a source of study "
                f"{study.name} ({study.source})"
            )
    return problems


def _model_beside(study, t_dir: Path) -> list[str]:
    """The model's table beside a study of measurements (`model_beside`) is the model's output, not
    the raw logs': it is taken as it is into the rebuild, and reported when it is missing or was
    made by another version of the model."""
    if not getattr(study, "model_beside", None):
        return []
    src = Path(study.tables_dir) / MODEL_BESIDE_FILE
    if not src.exists():
        return [f"{src}: missing (`scalestudy model beside --study {study.name}` writes it)"]
    shutil.copy(src, t_dir / MODEL_BESIDE_FILE)
    made = sorted({str(v) for v in read_table(src).get("model_version", [])})
    current = model_version(getattr(study, "root", "."))
    if made != [current]:
        return [
            f"{src}: made by {', '.join(made) or 'a model that recorded no version'}, not by this model "
            f"({current}): rebuild it"
        ]
    return []


def _model_sensitivity(study, t_dir: Path) -> None:
    """A predicted study's claim sensitivity (claim_sensitivity.csv, c3_terms.csv, claim_basis.json)
    is the model's output, like model_beside: taken as it is into the rebuild where it exists. Claims
    or a figure drawn from tables that are missing or other come out different, and are reported."""
    if not getattr(study, "prediction", None):
        return
    for name in (SENSITIVITY_FILE, C3_TERMS_FILE, CLAIM_BASIS_FILE):
        if (Path(study.tables_dir) / name).exists():
            shutil.copy(Path(study.tables_dir) / name, t_dir / name)


def _calibration_problems(run_dir: Path) -> list[str]:
    try:
        run = read_json_file(run_dir / "run.json", run_dir)
    except (OSError, RawLogError):
        return []
    if run.get("kind") != "predicted":
        return []
    seen, out = set(), []
    for c in [
        *calibration_provenance(run_dir, run),
        *calibration_provenance(run_dir, run, measured_inputs=True),
        *measured_files_provenance(run_dir, run),
    ]:
        for p in c["problems"]:
            if p not in seen:
                seen.add(p)
                out.append(p)
    return out


def made_by_other_code(figures_dir: Path, root: Path | str = ".") -> list[str]:
    """Figures and claims whose recorded code version (PNG metadata, the figure CSV's
    code_version column, claims.md) is not this code's: rebuild them (snakemake reruns them).
    A ledger figure (model_validation) and its ledger CSV must also name this performance model
    (code_version.model_version, its sources and the checkout files under `root` it reads)."""

    from PIL import Image  # heavy: only to read the PNGs' metadata

    # looked up at each call, not at import: tests patch code_version.code_version
    from scalestudy.measure.code_version import code_version

    figures_dir = Path(figures_dir)
    current = code_version()
    found: list[tuple[Path, str | None]] = []
    for p in sorted(figures_dir.glob("*.png")):
        with Image.open(p) as im:
            found.append((p, im.text.get("Software")))  # type: ignore[attr-defined]  # PNG images have .text
    ledgers = {figures_dir / m.LEDGER_FILE: m for m in LEDGER_FIGURES.values()}
    for p in sorted(figures_dir.glob("*.csv")):
        rows = read_csv_rows(p)
        if rows and "label" in rows[0]:  # a figure's CSV (claims.csv has no label column)
            found.append((p, rows[0].get("code_version")))
        elif p in ledgers:
            found.append((p, ledgers[p].ledger_model_version(p)))
    md = figures_dir / "claims.md"
    if md.exists():
        m = re.search(r"scalestudy \S+\+analysis\.[0-9a-f]+", md.read_text(encoding="utf-8"))
        found.append((md, m.group(0) if m else None))
    expected = dict.fromkeys((p for p, _ in found), current)
    model_files = [p for p in expected if p in ledgers or p.stem in LEDGER_FIGURES]
    if model_files:
        model = model_version(root)
        for p in model_files:
            expected[p] = model if p in ledgers else ledger_figure_version(model)
    return [
        f"{p}: made by {v or 'code that recorded no version'}, not by this code ({expected[p]}): rebuild it"
        for p, v in found
        if v != expected[p]
    ]


_PDF_STREAM = re.compile(rb"stream\r?\n(.*?)endstream", re.S)
_PDF_NUMBER = re.compile(rb"(-?\d*\.\d+|-?\d+)")
PDF_TOLERANCE_PT = 1e-3  # 1/72000 inch: far below anything drawn


def _pdf_tokens(data: bytes) -> list[bytes]:
    """A PDF's content, streams decompressed, without what only encodes it (stream lengths, the xref
    table and its offsets), split at numbers: [text, number, text, number, ...]."""
    body = data[: data.rfind(b"\nxref")] if b"\nxref" in data else data

    def inflate(m):
        try:  # a decompressobj ignores the end-of-line after the data (it may end in a CR byte itself)
            return b"stream\n" + zlib.decompressobj().decompress(m.group(1)) + b"\nendstream"
        except zlib.error:
            return m.group(0)

    body = re.sub(rb"/Length \d+", b"/Length", _PDF_STREAM.sub(inflate, body))
    body = re.sub(rb"(\d+ 0 obj\s+)\d+(\s+endobj)", rb"\1length\2", body)  # a stream's length as an object
    return _PDF_NUMBER.split(body)


def same_pdf(a: bytes, b: bytes) -> bool:
    """Whether two PDFs draw the same: equal bytes, or equal but for coordinates within
    PDF_TOLERANCE_PT (matplotlib's constrained layout solver can move a line by 1e-6 pt from one
    process to the next) and the stream encodings and offsets that follow from them."""
    if a == b:
        return True
    ta, tb = _pdf_tokens(a), _pdf_tokens(b)
    if len(ta) != len(tb):
        return False
    for i, (x, y) in enumerate(zip(ta, tb)):
        if x == y:
            continue
        if i % 2 == 0 or abs(float(x) - float(y)) > PDF_TOLERANCE_PT:
            return False
    return True


# The same sub-pt moves change the anti-aliasing of a few edge pixels of a PNG by a level or two:
# a PNG may differ from the one drawn here in at most PNG_TOLERANCE_PIXELS pixels, each channel by
# at most PNG_TOLERANCE_LEVELS of 255. A stale, swapped or edited figure changes thousands of pixels.
PNG_TOLERANCE_PIXELS = 50
PNG_TOLERANCE_LEVELS = 16


def png_difference(a: bytes, b: bytes) -> str | None:
    """How two PNGs differ in what they draw: None for equal bytes, or equal size and mode with the
    pixels differing within PNG_TOLERANCE_PIXELS and PNG_TOLERANCE_LEVELS; else a phrase saying how."""
    if a == b:
        return None
    import numpy as np  # heavy: only for PNGs that differ in bytes
    from PIL import Image  # heavy: only for PNGs that differ in bytes

    try:
        x, y = (Image.open(io.BytesIO(d)) for d in (a, b))
        if x.size != y.size or x.mode != y.mode:
            return f"{x.size[0]}x{x.size[1]} {x.mode} pixels against {y.size[0]}x{y.size[1]} {y.mode}"
        diff = np.abs(np.asarray(x, dtype=np.int16) - np.asarray(y, dtype=np.int16))
    except (OSError, ValueError):  # not a decodable PNG
        return "not a decodable PNG"
    if diff.ndim == 3:
        diff = diff.max(axis=2)
    pixels, level = int((diff > 0).sum()), int(diff.max())
    if level <= PNG_TOLERANCE_LEVELS and pixels <= PNG_TOLERANCE_PIXELS:
        return None
    return (
        f"{pixels} pixels differ, by up to {level} levels of 255 (tolerated: {PNG_TOLERANCE_PIXELS} pixels, "
        f"{PNG_TOLERANCE_LEVELS} levels)"
    )


def same_png(a: bytes, b: bytes) -> bool:
    """Whether two PNGs draw the same (png_difference finds none)."""
    return png_difference(a, b) is None


def compare_image(expected: Path, actual: Path) -> str | None:
    """A problem naming `actual` (a figure's PDF or PNG) if it differs from the image this code
    draws from the figure's CSV (`expected`): stale, swapped with another figure's, or edited. PNGs
    are compared by png_difference (the problem says how far apart they are), PDFs by same_pdf."""
    a, e = actual.read_bytes(), expected.read_bytes()
    if a == e or (actual.suffix == ".pdf" and same_pdf(a, e)):
        return None
    how = ""
    if actual.suffix == ".png":
        found = png_difference(a, e)
        if found is None:
            return None
        how = f"{found}; "
    import matplotlib  # heavy: only to name its version in a problem

    return (
        f"{actual}: differs from the image this code draws from {actual.with_suffix('.csv').name} ({how}stale, "
        f"swapped or edited; redraw it with `scalestudy figure {actual.stem}`; drawn here with matplotlib "
        f"{matplotlib.__version__})"
    )


def audit(
    study, *, figures: bool = True, claims: bool = True, manifest: dict | None = None, strict: bool = False
) -> list[str]:
    """Every problem of `study` (see the module docstring); `manifest`, where given, is filled with
    the sha256 of every output found as the raw logs give it (tables, claims, figure CSVs, PDFs and PNGs).
    `strict`: a run made with a check weakened (runs.csv `weakened`) is a problem too."""
    raw = Path(study.raw_dir)
    problems = verify_checksums(raw) + _import_sources(study)
    retired = getattr(study, "retired_runs", None) or {}
    for u in agg.unplanned_runs(study):
        if "moved aside" not in u["reason"] and not (u["run_id"] in retired and u["raw_dir"] == u["run_id"]):
            problems.append(f"{raw / u['raw_dir']}: unplanned run directory ({u['reason']})")
    problems += [
        f"{raw / run_id}: retired run (retired_runs) has no run directory: drop it from the study's retired_runs"
        for run_id in sorted(retired)
        if not (raw / run_id).is_dir()
    ]
    try:
        # a partial study's planned runs without raw logs are rows of status missing, not problems
        tables = agg.build_tables(study, verify_checksums=False, allow_missing=getattr(study, "partial", False))
    except agg.StudyDataError as e:
        return problems + [str(x) for x in e.errors]
    except RawLogError as e:
        return problems + [str(e)]
    if strict:
        problems += [
            f"{raw / str(r['raw_dir'])}: {agg.WEAKENED_NOTE}: {why} (refused by --strict)"
            for r in tables.runs
            for why in split_list(r.get("weakened"))
        ]
    with tempfile.TemporaryDirectory(prefix="scalestudy-audit-") as tmp:
        t_dir, f_dir = Path(tmp) / "tables", Path(tmp) / "figures"
        produced = agg.write_tables(tables, t_dir)
        problems += _model_beside(study, t_dir)
        _model_sensitivity(study, t_dir)
        loaded = agg.load_tables(t_dir)
        for p in produced:
            problem = compare(p, Path(study.tables_dir) / p.name)
            if problem:
                problems.append(problem)
            elif manifest is not None:
                manifest[str(Path(study.tables_dir) / p.name)] = sha256_file(p)
        if any(getattr(r.spec, "comm", "default") == "fake" for r in study.runs):  # rank shares
            for p in rank_shares.write_tables(study, t_dir):
                problem = compare(p, Path(study.tables_dir) / p.name)
                if problem:
                    problems.append(problem)
                elif manifest is not None:
                    manifest[str(Path(study.tables_dir) / p.name)] = sha256_file(p)
        if claims and not set(getattr(study, "figures", ()) or ()) <= set(RANK_FIGURES):  # no claims on rank shares
            for p in claims_mod.write_claims(loaded, study, f_dir):
                problem = compare(p, Path(study.figures_dir) / p.name)
                if problem:
                    problems.append(problem)
                elif manifest is not None:
                    manifest[str(Path(study.figures_dir) / p.name)] = sha256_file(p)
        if figures:
            # the study's own figures (every figure unless its file names a subset): the CSV, and the
            # PDF and PNG drawn from it by this code (deterministic: fixed metadata, no dates, the
            # fonts matplotlib ships), within the layout solver's sub-pt noise (same_pdf, same_png)
            for name in [f for f in FIGURES if f in (getattr(study, "figures", None) or FIGURES)]:
                for p in render(name, study, loaded, f_dir, formats=("csv", "pdf", "png")):
                    drawn = Path(study.figures_dir) / p.name
                    if p.suffix == ".csv":
                        problem = compare(p, drawn)
                    elif not drawn.exists():
                        problem = f"{drawn}: missing (figure {name} was not drawn)"
                    else:
                        problem = compare_image(p, drawn)
                    if problem:
                        problems.append(problem)
                    elif manifest is not None:
                        manifest[str(drawn)] = sha256_file(drawn)
    if figures or claims:
        problems += made_by_other_code(Path(study.figures_dir), getattr(study, "root", "."))
    return problems
