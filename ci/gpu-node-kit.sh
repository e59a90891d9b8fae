#!/usr/bin/env bash
# Make .kit/: everything a bare GPU machine without network or apt needs to bring up a one-node
# SLURM cluster and run `snakemake --profile slurm` there (ci/gpu-node-slurm.sh installs it).
#
#   .kit/deb/   Debian bookworm's slurm-wlm 22.05 (slurmctld, slurmd + slurmstepd, slurm-client,
#               slurm-wlm-basic-plugins) and munge, plus the shared libraries they load that a
#               slim image may lack (never libc6: the target's own is used); the installer
#               unpacks a library only where the target cannot resolve its soname
#   .kit/whl/   snakemake and the SLURM executor plugins with every dependency that the target
#               image lacks, for CPython 3.12 on x86-64 Linux, at the versions of this checkout's
#               venv (.venv); PuLP (~20 MB, the ILP scheduler's solver) is left out: without it
#               snakemake falls back to its greedy scheduler (or pass --scheduler greedy)
#   .kit/MANIFEST.json  which deb gives which soname, the wheels, the versions
#
# Run here (Debian bookworm x86-64 with apt sources, network, and the venv): bash ci/gpu-node-kit.sh
# Idempotent: what is there already is not downloaded again; stale files are removed.
# Environment: KIT (default .kit), VENV_PY (default .venv/bin/python), KIT_MAX_MIB (default 22).
set -euo pipefail
cd "$(dirname "$0")/.."

KIT=${KIT:-.kit}
VENV_PY=${VENV_PY:-.venv/bin/python}
KIT_MAX_MIB=${KIT_MAX_MIB:-22}

# the daemons, client tools and munge
MAIN_DEBS=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libmunge2)
# the shared libraries of every ELF file in MAIN_DEBS (ldd, transitively), less libc6: checked below
LIB_DEBS=(libhwloc15 libnuma1 liblz4-1 libreadline8 libtinfo6 libdbus-1-3 libsystemd0 libjson-c5 liblua5.1-0
          libyaml-0-2 libgcrypt20 libgpg-error0 libbz2-1.0 zlib1g libudev1 libaudit1 libcap-ng0 libcap2 liblzma5
          libzstd1 libpam0g)
# what the target image has (or the caller installs from .whl/): not in the kit
REMOTE_HAS="pandas numpy pyyaml jinja2 markupsafe psutil requests urllib3 idna charset-normalizer certifi
packaging tabulate wrapt nvidia-ml-py jsonschema attrs referencing rpds-py jsonschema-specifications
python-dateutil six tzdata"
# left out on purpose (see above)
LEAVE_OUT="pulp"
WHEEL_TOPS="snakemake snakemake-executor-plugin-slurm snakemake-executor-plugin-slurm-jobstep"

mkdir -p "$KIT/deb" "$KIT/whl"

# ---- debs ------------------------------------------------------------------------------------
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64 -oAPT::Sandbox::User=root)
mkdir -p /tmp/amd64/partial
if [ -z "$(find /tmp/amd64 -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
    echo "gpu-node-kit: apt-get update (lists in /tmp/amd64)"
    apt-get "${o[@]}" update -qq
fi
all_debs=("${MAIN_DEBS[@]}" "${LIB_DEBS[@]}")
want=()
for p in "${all_debs[@]}"; do
    v=$(apt-cache "${o[@]}" policy "$p" | awk '/Candidate:/ {print $2}')
    [ -n "$v" ] && [ "$v" != "(none)" ] || { echo "gpu-node-kit: no candidate for $p in apt's lists" >&2; exit 1; }
    f="${p}_${v//:/%3a}_$(apt-cache "${o[@]}" show "$p=$v" | awk '/^Architecture:/ {print $2; exit}').deb"
    want+=("$f")
    [ -s "$KIT/deb/$f" ] || (cd "$KIT/deb" && apt-get "${o[@]}" download -qq "$p=$v")
    [ -s "$KIT/deb/$f" ] || { echo "gpu-node-kit: $f did not download" >&2; exit 1; }
done
for f in "$KIT"/deb/*.deb; do  # stale versions
    case " ${want[*]} " in *" $(basename "$f") "*) ;; *) echo "gpu-node-kit: removing stale $f"; rm -f "$f" ;; esac
done

# the sonames each library deb gives, and the check that the kit + libc6 resolve every ELF file of
# the main debs: all debs unpacked into a scratch root, ldd with that root's library dirs first
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for f in "${want[@]}"; do dpkg-deb -x "$KIT/deb/$f" "$scratch/root"; dpkg-deb -c "$KIT/deb/$f" \
    | awk '{print $6}' | sed 's|^\./||' > "$scratch/$(dpkg-deb -f "$KIT/deb/$f" Package).files"; done
libdirs="$scratch/root/usr/lib/x86_64-linux-gnu/slurm-wlm:$scratch/root/usr/lib/x86_64-linux-gnu:$scratch/root/lib/x86_64-linux-gnu"
: > "$scratch/ldd.txt"
for p in "${MAIN_DEBS[@]}"; do
    while read -r rel; do
        f="$scratch/root/$rel"
        [ -f "$f" ] && [ ! -L "$f" ] && [ "$(head -c4 "$f" | tr -d '\0')" = $'\x7fELF' ] || continue
        LD_LIBRARY_PATH=$libdirs ldd "$f" 2>&1 | sed "s|^|$rel |" >> "$scratch/ldd.txt" || true
    done < "$scratch/$p.files"
done
"$VENV_PY" - "$scratch" "$KIT" "${MAIN_DEBS[*]}" "${LIB_DEBS[*]}" "${want[*]}" <<'EOF'
import json, re, sys
from pathlib import Path
scratch, kit, main, libs, files = Path(sys.argv[1]), Path(sys.argv[2]), *[a.split() for a in sys.argv[3:]]
libc = {"libc.so.6", "libm.so.6", "libdl.so.2", "libresolv.so.2", "libpthread.so.0", "librt.so.1",
        "ld-linux-x86-64.so.2", "linux-vdso.so.1", "libutil.so.1", "libanl.so.1"}
problems, needed = [], set()
for line in (scratch / "ldd.txt").read_text().splitlines():
    rel, _, rest = line.partition(" ")
    if "not found" in rest or "version `" in rest:
        problems.append(f"{rel}: {rest.strip()}")
        continue
    m = re.match(r"\s*(\S+)\s+=>\s+(\S+)", rest)
    if not m:
        continue
    name, path = m.groups()
    if name in libc or path.startswith(str(scratch / "root")) and "/slurm-wlm/" in path:
        continue
    if not path.startswith(str(scratch / "root")):
        problems.append(f"{rel}: {name} resolves outside the kit ({path}): add its deb to LIB_DEBS")
    needed.add(name)
deb_files = {p: set((scratch / f"{p}.files").read_text().split()) for p in main + libs}
sonames = {p: sorted(n for n in needed if any(f.rsplit("/", 1)[-1] == n for f in deb_files[p])) for p in libs}
for p, names in sonames.items():
    if not names:
        problems.append(f"{p}: no ELF file of the main debs needs it: drop it from LIB_DEBS")
if problems:
    sys.exit("gpu-node-kit: the debs are not a closed set:\n  " + "\n  ".join(problems))
man = json.loads((kit / "MANIFEST.json").read_text()) if (kit / "MANIFEST.json").exists() else {}
man.update(main_debs={p: next(f for f in files if f.startswith(p + "_")) for p in main},
           lib_debs={p: {"deb": next(f for f in files if f.startswith(p + "_")), "sonames": sonames[p]} for p in libs})
(kit / "MANIFEST.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
print(f"gpu-node-kit: {len(main) + len(libs)} debs; every ELF file of {', '.join(main)} resolves against them + libc6")
EOF

# ---- wheels ----------------------------------------------------------------------------------
# the dependency closure of WHEEL_TOPS in the venv (markers for CPython 3.12 on x86-64 Linux),
# less what the target has and what is left out on purpose; versions as installed in the venv
mapfile -t reqs < <("$VENV_PY" - "$WHEEL_TOPS" "$REMOTE_HAS" "$LEAVE_OUT" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, distribution
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
tops, has, out = (set(map(canon, a.split())) for a in sys.argv[1:])
env = default_environment()
env.update(python_version="3.12", python_full_version="3.12.3", implementation_version="3.12.3",
           platform_machine="x86_64", sys_platform="linux", platform_system="Linux", os_name="posix",
           implementation_name="cpython", platform_python_implementation="CPython", extra="")
seen, todo, pins = set(), list(tops), []
while todo:
    name = todo.pop()
    if name in seen or name in has or name in out:
        continue
    seen.add(name)
    try:
        dist = distribution(name)
    except PackageNotFoundError:
        sys.exit(f"gpu-node-kit: {name} is not installed in the venv: cannot pin it")
    pins.append(f"{dist.metadata['Name']}=={dist.version}")
    for r in dist.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate(env):
            todo.append(canon(req.name))
print("\n".join(sorted(pins, key=str.lower)))
EOF
)
echo "gpu-node-kit: ${#reqs[@]} wheels: ${reqs[*]}"
# the pins without a wheel in the kit yet
mapfile -t missing < <("$VENV_PY" - "$KIT/whl" "${reqs[@]}" <<'EOF'
import sys
from pathlib import Path
from packaging.utils import canonicalize_name as canon, parse_wheel_filename
have = {(n, str(v)) for n, v, _, _ in (parse_wheel_filename(w.name) for w in Path(sys.argv[1]).glob("*.whl"))}
print("\n".join(p for p in sys.argv[2:] if (canon(p.split("==")[0]), p.split("==")[1]) not in have))
EOF
)
pipq() { python3 -m pip "$@" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true; }
bin_opts=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
          --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
if [ ${#missing[@]} -gt 0 ] && [ -n "${missing[0]}" ]; then
    echo "gpu-node-kit: downloading ${#missing[@]} wheels"
    if ! python3 -m pip download -q "${bin_opts[@]}" -d "$KIT/whl" "${missing[@]}" >/dev/null 2>&1; then
        # one at a time; a project that publishes no wheel (connection_pool 0.0.3: an sdist only)
        # is built here into a pure-Python wheel, which must come out py3-none-any
        for r in "${missing[@]}"; do
            python3 -m pip download -q "${bin_opts[@]}" -d "$KIT/whl" "$r" >/dev/null 2>&1 && continue
            echo "gpu-node-kit: no wheel of $r for CPython 3.12 x86-64: building one from its sdist"
            b=$(mktemp -d)
            pipq wheel -q --no-deps --no-binary=:all: -w "$b" "$r"
            ls "$b"/*-py3-none-any.whl >/dev/null 2>&1 || { echo "gpu-node-kit: $r built no pure-Python wheel ($(ls "$b"))" >&2; exit 1; }
            mv "$b"/*.whl "$KIT/whl/"
            rm -rf "$b"
        done
    fi
fi

# every wheel's own requirements are in the kit or on the target (or left out on purpose); stale
# wheels (other versions) go
"$VENV_PY" - "$KIT" "$REMOTE_HAS" "$LEAVE_OUT" "${reqs[@]}" <<'EOF'
import json, sys, zipfile
from email.parser import Parser
from pathlib import Path
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
kit, has, out, pins = Path(sys.argv[1]), set(sys.argv[2].split()), set(sys.argv[3].split()), sys.argv[4:]
want = {canon(p.split("==")[0]): p.split("==")[1] for p in pins}
env = default_environment()
env.update(python_version="3.12", python_full_version="3.12.3", platform_machine="x86_64", sys_platform="linux",
           platform_system="Linux", os_name="posix", implementation_name="cpython",
           platform_python_implementation="CPython", extra="")
meta, problems = {}, []
for whl in sorted((kit / "whl").glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        m = Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
    name = canon(m["Name"])
    if want.get(name) != m["Version"]:
        print(f"gpu-node-kit: removing stale {whl.name}")
        whl.unlink()
        continue
    meta[name] = (whl.name, m.get_all("Requires-Dist") or [])
for name in want:
    if name not in meta:
        problems.append(f"{name}=={want[name]}: no wheel in {kit / 'whl'}")
for name, (fname, requires) in meta.items():
    for r in requires:
        req = Requirement(r)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        dep = canon(req.name)
        if dep in meta:
            if meta[dep][0] and not req.specifier.contains(want[dep], prereleases=True):
                problems.append(f"{fname} wants {r}; the kit has {dep} {want[dep]}")
        elif dep not in has and dep not in out:
            problems.append(f"{fname} wants {r}: neither in the kit nor on the target")
if problems:
    sys.exit("gpu-node-kit: the wheels are not a closed set:\n  " + "\n  ".join(problems))
man = json.loads((kit / "MANIFEST.json").read_text())
man.update(wheels=sorted(v[0] for v in meta.values()), target_has=sorted(has), left_out=sorted(out))
(kit / "MANIFEST.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
print(f"gpu-node-kit: {len(meta)} wheels; their requirements are in the kit or on the target "
      f"(left out: {', '.join(sorted(out))})")
EOF

# ---- size, and keep .kit/ out of git ---------------------------------------------------------
exclude=$(git rev-parse --git-path info/exclude)
grep -qxF '/.kit/' "$exclude" 2>/dev/null || echo '/.kit/' >> "$exclude"
kib=$(du -sk "$KIT" | cut -f1)
echo "gpu-node-kit: $KIT is $((kib / 1024)) MiB ($(du -sh "$KIT/deb" | cut -f1) debs, $(du -sh "$KIT/whl" | cut -f1) wheels)"
if [ "$kib" -gt $((KIT_MAX_MIB * 1024)) ]; then
    echo "gpu-node-kit: $KIT is larger than $KIT_MAX_MIB MiB" >&2
    exit 1
fi
