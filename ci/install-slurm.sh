#!/usr/bin/env bash
# Install SLURM (Debian's slurm-wlm: slurmctld, slurmd, srun, sbatch, ...) and munge, for the
# tests that bring up a real SLURM cluster on this machine (tests/launch/test_slurm_cluster.py).
# Idempotent: does nothing when every tool is already there. Needs root and apt-get.
set -euo pipefail

need=(munged munge slurmctld slurmd sbatch srun squeue scontrol scancel sinfo)
missing=()
for t in "${need[@]}"; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-slurm: slurm and munge are installed ($(slurmd -V))"
    exit 0
fi
echo "install-slurm: missing ${missing[*]}: installing slurm-wlm and munge"
if [ "$(id -u)" -ne 0 ]; then
    echo "install-slurm: run as root (apt-get install needs it)" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-slurm: no apt-get here; install SLURM (slurmctld, slurmd, client tools) and munge yourself" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# the packages' own services must not start (there is no init system in CI, and the tests
# start the daemons they need with a configuration of their own)
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod +x "$policy"
    made_policy=1
fi
trap '[ "$made_policy" = 1 ] && rm -f "$policy"' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm munge iproute2 util-linux >/dev/null
for t in "${need[@]}"; do
    command -v "$t" >/dev/null 2>&1 || { echo "install-slurm: $t still missing after install" >&2; exit 1; }
done
echo "install-slurm: installed $(slurmd -V)"
