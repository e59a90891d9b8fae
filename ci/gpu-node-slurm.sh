#!/usr/bin/env bash
# A one-node SLURM cluster with its GPUs as GRES on a bare GPU machine (no network, no apt), from
# the kit that ci/gpu-node-kit.sh made (.kit/: Debian bookworm's slurm-wlm 22.05 and munge, the
# libraries they need, the snakemake wheels). As root, from the repository root:
#
#   bash ci/gpu-node-slurm.sh up [--gpus N] [--workdir DIR]    install the kit, start munged,
#                                                               slurmctld, slurmd (GRES gpu:N)
#   bash ci/gpu-node-slurm.sh down [--workdir DIR]              stop them, remove the configuration
#
# then `snakemake --profile slurm --config study=STUDY` from the repository root with
# PATH=$SITE/bin:$PATH and PYTHONPATH=$SITE:$PWD/src (printed at the end of `up`).
#
# up: unpacks the slurm and munge debs into / where the machine has no SLURM yet (the binaries go
# where they were built to look: /usr/sbin/slurmstepd, plugins in /usr/lib/x86_64-linux-gnu/
# slurm-wlm), and a library deb only where the machine cannot resolve its soname (ldconfig -p);
# an existing file is never overwritten. Then ldconfig, the munge user, the wheels into $SITE
# (pip --target), a `scalestudy` command where there is none, and the cluster through
# tests/launch/slurm_cluster.py (LocalSlurm, --gpus N: gres.conf with File=/dev/nvidiaK). It checks
# srun on the GPU and prints what a failure needs to be understood. Idempotent: a cluster that
# answers is left as it is.
#
# Environment: GPUS (default 1), SITE (default /tmp/site), PYTHON (default python3), KIT (default
# .kit), SLURM_WORKDIR (default /tmp/scalestudy-slurm), UP_TIMEOUT (seconds for each daemon,
# default 45), KIT_ROOT (unpack into this directory instead of /, and stop there: a test),
# KIT_NO_WHEELS=1 (leave the wheels and the snakemake check out: a test of the cluster alone).
set -uo pipefail
cd "$(dirname "$0")/.."

KIT=${KIT:-.kit}
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
WORKDIR=${SLURM_WORKDIR:-/tmp/scalestudy-slurm}
GPUS=${GPUS:-1}
UP_TIMEOUT=${UP_TIMEOUT:-45}
ROOT=${KIT_ROOT:-/}
TOOLS=(munged munge unmunge mungekey slurmctld slurmd slurmstepd sbatch srun squeue scontrol scancel sinfo sacct sacctmgr)
for d in /usr/local/sbin /usr/sbin /sbin; do case ":$PATH:" in *":$d:"*) ;; *) PATH="$PATH:$d" ;; esac; done
export PATH

say() { echo "gpu-node-slurm: $*"; }
die() { echo "gpu-node-slurm: FAILED: $*" >&2; exit 1; }

action=${1:-}
shift || true
while [ $# -gt 0 ]; do
    case "$1" in
        --gpus) GPUS=$2; shift 2 ;;
        --workdir) WORKDIR=$2; shift 2 ;;
        *) die "unknown argument $1 (usage: $0 up|down [--gpus N] [--workdir DIR])" ;;
    esac
done

logs_tail() {
    for f in "$WORKDIR"/log/*.log "$WORKDIR"/log/*.out /var/log/munge/munged.log; do
        [ -s "$f" ] || continue
        echo "--- $f"
        tail -n 25 "$f"
    done
}

cluster_answers() {
    [ -f "$WORKDIR/cluster.json" ] && timeout 10 scontrol ping 2>/dev/null | grep -q UP \
        && [ -n "$(timeout 10 sinfo -h -N -t idle,mixed,allocated -o %N 2>/dev/null)" ]
}

down() {
    if [ -f "$WORKDIR/cluster.json" ]; then
        timeout 120 "$PY" tests/launch/slurm_cluster.py down --workdir "$WORKDIR" || say "down did not finish cleanly"
    else
        say "no cluster of this script's in $WORKDIR: nothing to stop"
    fi
}

# ---- install the kit: debs ---------------------------------------------------------------------
install_debs() {
    "$PY" - "$KIT" "$ROOT" "${TOOLS[*]}" <<'EOF'
import io, json, os, shutil, subprocess, sys, tarfile
from pathlib import Path

kit, root, tools = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split()
man = json.loads((kit / "MANIFEST.json").read_text())
SKIP = ("usr/share/doc/", "usr/share/man/", "usr/share/lintian/", "usr/share/bug/")


def data_tar(deb: Path) -> tarfile.TarFile:
    """The data.tar.* member of a .deb (an ar archive), read in Python: no dpkg needed."""
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise SystemExit(f"{deb}: not a .deb")
        while True:
            hdr = f.read(60)
            if len(hdr) < 60:
                raise SystemExit(f"{deb}: no data.tar member")
            name, size = hdr[:16].decode().strip().rstrip("/"), int(hdr[48:58].decode().strip())
            body = f.read(size)
            if size % 2:
                f.read(1)
            if name.startswith("data.tar"):
                break
    try:
        return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
    except tarfile.ReadError:  # e.g. zstd before Python 3.14
        out = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True)
        return tarfile.open(fileobj=io.BytesIO(out.stdout), mode="r:")


def unpack(deb: Path) -> tuple[int, int]:
    """Unpack into root; an existing file or link is left alone. Directories that exist as
    symlinks (merged /usr: /lib -> usr/lib) are followed, never replaced."""
    new = kept = 0
    with data_tar(deb) as tar:
        for m in tar.getmembers():
            rel = m.name.lstrip("./")
            if not rel or rel.startswith(SKIP):
                continue
            dest = root / rel
            if m.isdir():
                if not os.path.isdir(dest):
                    os.makedirs(dest, mode=0o755, exist_ok=True)
                continue
            if os.path.lexists(dest):
                kept += 1
                continue
            os.makedirs(dest.parent, exist_ok=True)
            if m.issym():
                os.symlink(m.linkname, dest)
            elif m.islnk():
                shutil.copy2(root / m.linkname.lstrip("./"), dest)
            elif m.isfile():
                with tar.extractfile(m) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
                os.chmod(dest, m.mode & 0o7777)
                os.utime(dest, (m.mtime, m.mtime))
            else:
                continue
            new += 1
    return new, kept


test_root = root != Path("/")
# libraries: only those whose soname this machine cannot resolve
known = set()
if not test_root and shutil.which("ldconfig"):
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    known = {ln.split()[0] for ln in out.splitlines()[1:] if "x86-64" in ln}
missing = {p: [s for s in v["sonames"] if s not in known] for p, v in man["lib_debs"].items()}
missing = {p: s for p, s in missing.items() if s}
print(f"gpu-node-slurm: libraries this machine lacks: {' '.join(s for v in missing.values() for s in v) or 'none'}"
      + (f" (of {sum(len(v['sonames']) for v in man['lib_debs'].values())} that SLURM and munge load)"))
for p in sorted(missing):
    new, kept = unpack(kit / "deb" / man["lib_debs"][p]["deb"])
    print(f"gpu-node-slurm:   unpacked {p} ({new} files{f', {kept} already there' if kept else ''})")
# slurm and munge: unless the machine has them all already
have = [t for t in tools if shutil.which(t)]
if not test_root and len(have) == len(tools):
    print(f"gpu-node-slurm: slurm and munge are installed here already: {shutil.which('slurmd')}")
else:
    if have and not test_root:
        print(f"gpu-node-slurm: note: some SLURM/munge tools exist already ({' '.join(have)}): their files are kept")
    for p, deb in sorted(man["main_debs"].items()):
        new, kept = unpack(kit / "deb" / deb)
        print(f"gpu-node-slurm:   unpacked {deb} ({new} files{f', {kept} already there' if kept else ''})")
    # what the packages' postinst would do with update-alternatives: slurmd -> slurmd-wlm, ...
    for name in ("slurmctld", "slurmd", "slurmstepd"):
        link = root / "usr" / "sbin" / name
        if not os.path.lexists(link) and (root / "usr" / "sbin" / f"{name}-wlm").exists():
            os.symlink(f"{name}-wlm", link)
            print(f"gpu-node-slurm:   /usr/sbin/{name} -> {name}-wlm")
EOF
}

# ---- up ----------------------------------------------------------------------------------------
up() {
    local t0=$SECONDS rc=0 line pyexe
    say "host: $( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || echo 'no /etc/os-release'); kernel $(uname -r);" \
        "$("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>&1)"
    say "GPU device files: $(ls /dev/nvidia[0-9]* 2>/dev/null | tr '\n' ' ' || true)$(ls /dev/nvidia[0-9]* >/dev/null 2>&1 || echo none);" \
        "hostname $(hostname) ($(getent hosts "$(hostname)" >/dev/null && echo resolves || echo 'does not resolve'));" \
        "/sys/fs/cgroup: $(stat -f -c %T /sys/fs/cgroup 2>&1)"
    [ "$(id -u)" = 0 ] || die "run as root (it installs into / and starts daemons)"
    [ -f "$KIT/MANIFEST.json" ] || die "no $KIT/MANIFEST.json: make the kit with ci/gpu-node-kit.sh (where apt works) and carry .kit"
    if [ "$ROOT" != / ]; then
        mkdir -p "$ROOT"
        install_debs || die "unpacking the kit into $ROOT failed"
        say "unpacked into $ROOT (KIT_ROOT set: nothing started)"
        return 0
    fi
    if cluster_answers; then
        say "a cluster of this script's answers already ($WORKDIR): left as it is"
    else
        install_debs || die "unpacking the kit failed (above)"
        # a machine whose loader does not search Debian's multiarch directories (not Debian/Ubuntu)
        if [ -d /etc/ld.so.conf.d ] && ! grep -rqs x86_64-linux-gnu /etc/ld.so.conf /etc/ld.so.conf.d; then
            printf '/usr/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n' > /etc/ld.so.conf.d/scalestudy-kit.conf
            say "added /etc/ld.so.conf.d/scalestudy-kit.conf (the loader did not search x86_64-linux-gnu)"
        fi
        ldconfig 2>/dev/null || say "ldconfig failed (continuing)"
        local bad="" p nf
        for b in slurmctld slurmd slurmstepd munged munge sbatch srun scontrol; do
            p=$(command -v "$b") || { bad+=" $b: not on PATH;"; continue; }
            command -v ldd >/dev/null || continue
            nf=$(ldd "$(readlink -f "$p")" 2>&1 | grep -E 'not found' || true)
            [ -z "$nf" ] || bad+=" $p: $(echo "$nf" | tr -s ' \n' ' ');"
        done
        [ -z "$bad" ] || die "after unpacking the kit, a binary cannot load:$bad"
        say "slurm $(slurmd -V 2>&1 | head -1), $(munged -V 2>&1 | head -1): binaries load"
        # munged runs as the munge user (as the Debian package would create it)
        if ! getent passwd munge >/dev/null; then
            if command -v useradd >/dev/null; then
                getent group munge >/dev/null || groupadd --system munge
                useradd --system --gid munge --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin munge
            else
                gid=$(getent group munge | cut -d: -f3)
                if [ -z "$gid" ]; then gid=977; echo "munge:x:$gid:" >> /etc/group; fi
                echo "munge:x:977:$gid::/nonexistent:/usr/sbin/nologin" >> /etc/passwd
            fi
            say "created the munge user ($(id munge))"
        fi
        mkdir -p /etc/munge
        chown munge:munge /etc/munge && chmod 700 /etc/munge
        [ ! -e /etc/munge/munge.key ] || { chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key; }
    fi

    # ---- the wheels ----
    if [ "${KIT_NO_WHEELS:-0}" = 1 ]; then
        say "KIT_NO_WHEELS=1: the wheels are not installed, snakemake is not checked"
    elif [ -d "$KIT/whl" ]; then
        local stamp="$SITE/.scalestudy-kit-wheels" sum
        sum=$(cd "$KIT/whl" && ls ./*.whl | sort | cksum)
        if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
            say "wheels already installed in $SITE"
        else
            local tmp
            tmp=$(mktemp -d)
            # into a scratch target, then merged: pip --target skips a bin/ that exists already
            "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$tmp" "$KIT"/whl/*.whl \
                || die "pip could not install the wheels of $KIT/whl"
            mkdir -p "$SITE"
            cp -a "$tmp/." "$SITE/" && rm -rf "$tmp"
            echo "$sum" > "$stamp"
            say "installed $(ls "$KIT"/whl/*.whl | wc -l) wheels into $SITE"
        fi
    fi
    if [ "${KIT_NO_WHEELS:-0}" != 1 ]; then
        export PATH="$SITE/bin:$PATH"
        export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
        pyexe=$("$PY" -c 'import sys; print(sys.executable)')
        if ! command -v scalestudy >/dev/null; then
            mkdir -p "$SITE/bin"
            printf '#!/bin/sh\nexec %s -m scalestudy "$@"\n' "$pyexe" > "$SITE/bin/scalestudy"
            chmod +x "$SITE/bin/scalestudy"
            say "wrote $SITE/bin/scalestudy (exec $pyexe -m scalestudy): the workflow's rules call \`scalestudy\`"
        fi
        "$PY" -c 'import snakemake, snakemake_executor_plugin_slurm as s, snakemake.cli, sqlmodel, pandas, scalestudy
from importlib.metadata import version as v
print("gpu-node-slurm: snakemake", v("snakemake"), "+ slurm plugin", v("snakemake-executor-plugin-slurm"), "import")' \
            || die "snakemake or its SLURM plugin does not import with PYTHONPATH=$PYTHONPATH (above)"
    fi

    # ---- the cluster ----
    if ! cluster_answers; then
        [ ! -f "$WORKDIR/cluster.json" ] || { say "a cluster of this script's is recorded but does not answer: stopping it"; down; }
        say "starting munged, slurmctld, slurmd with GRES gpu:$GPUS (state and logs in $WORKDIR)"
        rm -f "$WORKDIR"/log/*.log "$WORKDIR"/log/*.out  # the logs of an earlier cluster would mislead
        timeout $((3 * UP_TIMEOUT + 60)) "$PY" tests/launch/slurm_cluster.py up --gpus "$GPUS" \
            --timeout "$UP_TIMEOUT" --workdir "$WORKDIR"
        rc=$?
        if [ $rc -ne 0 ] && [ $rc -ne 124 ] && cat "$WORKDIR"/log/slurmd*.log 2>/dev/null | grep -qi 'cgroup'; then
            # slurmd 22.05 starts its cgroup plugin in any case; where it failed on cgroups although
            # /sys/fs/cgroup looked usable, once more with cgroup.conf on an empty directory
            say "slurmd failed on cgroups ($(stat -f -c %T /sys/fs/cgroup 2>&1) at /sys/fs/cgroup): once more with --cgroup-stub yes"
            rm -f "$WORKDIR"/log/*.log "$WORKDIR"/log/*.out
            timeout $((3 * UP_TIMEOUT + 60)) "$PY" tests/launch/slurm_cluster.py up --gpus "$GPUS" \
                --timeout "$UP_TIMEOUT" --workdir "$WORKDIR" --cgroup-stub yes
            rc=$?
        fi
        if [ $rc -ne 0 ]; then
            # slurm_cluster.py's error names the daemon and ends with the logs' tails; a hang has none
            [ $rc -ne 124 ] || logs_tail
            die "the SLURM cluster did not come up (each daemon had ${UP_TIMEOUT} s; logs above and in $WORKDIR/log)"
        fi
    fi
    scontrol show node | grep -E 'NodeName|Gres|CfgTRES|State|RealMemory' | sed 's/^/    /'
    sinfo -o '    %P %N %T cpus=%c mem=%m gres=%G'
    line=$(timeout 60 srun -N1 -n1 --gpus-per-node="$GPUS" -t 2 sh -c \
        'echo "job $SLURM_JOB_ID on $(hostname): CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"' 2>&1)
    rc=$?
    echo "    srun --gpus-per-node=$GPUS: $line"
    if [ $rc -ne 0 ]; then
        logs_tail
        die "srun with --gpus-per-node=$GPUS failed ($rc): the cluster is up but cannot run a GPU job"
    fi
    # CUDA inside a job step (slurmstepd's environment): a diagnostic, not a condition
    if [ -n "${pyexe:-}" ] && ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
        line=$(timeout 120 srun -N1 -n1 --gpus-per-node="$GPUS" -t 3 "$pyexe" -c 'import torch
print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tail -3)
        echo "    srun python -c 'import torch ...': $line"
    fi
    say "ready in $((SECONDS - t0)) s. Now, from $PWD:"
    echo "    export PATH=$SITE/bin:\$PATH PYTHONPATH=$SITE:$PWD/src"
    echo "    snakemake --profile slurm --scheduler greedy --config study=STUDY"
}

case "$action" in
    up) up ;;
    down) down ;;
    *) die "usage: $0 up|down [--gpus N] [--workdir DIR]" ;;
esac
