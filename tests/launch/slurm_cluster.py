"""A real SLURM cluster on this machine, for the tests of the SLURM integration.

    LocalSlurm(workdir, nodes=1).start()   munged (unless one already answers), slurmctld and
                                           one slurmd on this host
    LocalSlurm(workdir, nodes=2).start()   the same with two slurmd, each in its own network
                                           namespace (its own address and hostname), joined by
                                           a bridge: a two-node cluster on one machine
    LocalSlurm(workdir, gpus=1).start()    a node with one GPU as GRES (GresTypes=gpu, Gres=gpu:1,
                                           /etc/slurm/gres.conf: File=/dev/nvidiaK where those
                                           device files exist, else a stand-in, /dev/null)
    cluster.stop()                         cancels the jobs, stops exactly the daemons it
                                           started, removes the namespaces, restores the files

The configuration is written where SLURM looks inside jobs too: /etc/slurm/slurm.conf (a
SLURM_CONF pointing elsewhere is not passed on to job steps), and removed by stop(). A machine
with a SLURM configuration or SLURM daemons of its own is left alone (the tests skip, or fail in
CI). Accounting storage is off, so status queries go through squeue (MinJobAge keeps finished
jobs visible to it); proctrack/linuxproc and task/none need no cgroups (where /sys/fs/cgroup
holds no cgroup file system, a cgroup.conf on an empty directory lets slurmd start all the
same). Job processes that linuxproc loses track of (reparented when their shell died) are found
by the cluster's name in their environment and stopped too. Root is required, and Debian's
slurm-wlm and munge (ci/install-slurm.sh, or ci/gpu-node-slurm.sh from a kit). One test cluster
a machine at a time (a lock file).

Without SLURM the tests that need it skip, except when CI is set: there they fail, so that CI
cannot pass without having run them.

By hand (as root):  python tests/launch/slurm_cluster.py up [--nodes 2] [--gpus N] [--workdir DIR]
                    python tests/launch/slurm_cluster.py down [--workdir DIR]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLURM_CONF = Path("/etc/slurm/slurm.conf")
# beside slurm.conf, where slurmd looks for it; written only for a cluster with GPUs
GRES_CONF = SLURM_CONF.parent / "gres.conf"
# written only where slurmd's cgroup autodetection would fail (cgroup_stub_text)
CGROUP_CONF = SLURM_CONF.parent / "cgroup.conf"
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
HOSTS = Path("/etc/hosts")
MARK = "# written by scalestudy tests/launch/slurm_cluster.py"
TOOLS = ("munged", "munge", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")
# the two-node mode: a bridge on the host and one namespace a node
BRIDGE = "ssbr0"
SUBNET = "10.77.0"
HOST_ADDR = f"{SUBNET}.1"
# one test cluster a machine at a time (pytest-xdist workers, two checkouts): they would share
# /etc/slurm/slurm.conf and the daemons' ports
LOCK = Path(tempfile.gettempdir()) / "scalestudy-slurm-test.lock"


class TwoNodesUnusable(RuntimeError):
    """The namespaces were made but one cannot reach the other (e.g. a firewall on bridges)."""


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def why_unusable() -> str | None:
    """Why a local cluster cannot be started here, or None."""
    missing = missing_tools()
    if missing:
        return f"SLURM or munge is not installed (missing {', '.join(missing)}): run ci/install-slurm.sh as root"
    if os.geteuid() != 0:
        return "starting a local SLURM cluster needs root"
    if SLURM_CONF.exists() and MARK not in SLURM_CONF.read_text(errors="replace"):
        return f"this machine has a SLURM configuration of its own ({SLURM_CONF}): the test cluster would replace it"
    running = sorted({_comm(d) for d in Path("/proc").iterdir() if d.name.isdigit()} & {"slurmctld", "slurmd"})
    if running:
        return f"SLURM daemons already run here ({', '.join(running)}): the test cluster would collide with them"
    return None


def _comm(proc_dir: Path) -> str:
    try:
        return (proc_dir / "comm").read_text().strip()
    except OSError:
        return ""


def require_cluster_tools() -> None:
    """Skip the calling test when no local cluster can run here; fail instead when CI is set."""
    import pytest

    why = why_unusable()
    if why is None:
        return
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"CI is set and {why}: the SLURM tests must run in CI", pytrace=False)
    pytest.skip(why)


def _run(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return out


def node_hardware() -> dict:
    """This machine's CPUs and memory as slurmd sees them (`slurmd -C`)."""
    line = _run(["slurmd", "-C"]).stdout.splitlines()[0]
    fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    keep = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    hw = {k: fields[k] for k in keep if k in fields}
    # leave memory for the daemons and the test itself
    hw["RealMemory"] = str(max(512, int(hw.get("RealMemory", "2048")) - 1024))
    return hw


def can_make_two_nodes() -> str | None:
    """None if network namespaces (for a second slurmd with its own address) can be made here,
    else why not."""
    if shutil.which("ip") is None or shutil.which("nsenter") is None or shutil.which("unshare") is None:
        return "ip, nsenter or unshare is missing"
    name = f"ssprobe{os.getpid() % 100000}"
    out = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        return f"cannot create a network namespace: {out.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    out = subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True, timeout=30)
    if out.returncode == 0:
        return f"the bridge {BRIDGE} exists already (another test cluster on this machine?)"
    return None


def munge_answers() -> bool:
    try:
        enc = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        if enc.returncode != 0:
            return False
        return subprocess.run(["unmunge"], input=enc.stdout, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def gpu_device_files(count: int, dev: Path = Path("/dev")) -> list[str] | None:
    """The first `count` NVIDIA device files (/dev/nvidia0, /dev/nvidia1, ... in numeric order), or
    None when fewer exist (then gres.conf names stand-ins)."""
    found = sorted((p for p in dev.glob("nvidia*") if p.name[6:].isdigit()), key=lambda p: int(p.name[6:]))
    return [str(p) for p in found[:count]] if len(found) >= count else None


# Character devices that stand in for GPUs on a machine without /dev/nvidiaN (a test host):
# slurmd 22.05 drops a GPU without File= ("Removing file-less GPU") and refuses a File= that is
# not a character or block device. With task/none nothing is bound to them; jobs still get
# CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS by the GPU's index.
STAND_IN_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")


def gres_conf_text(gpus: int, device_files: list[str] | None) -> tuple[str, str | None]:
    """gres.conf for `gpus` GPUs on every node, and a note when it names stand-in devices
    instead of NVIDIA device files."""
    if gpus < 1:
        raise ValueError("gres.conf needs gpus >= 1")
    if device_files is not None and len(device_files) != gpus:
        raise ValueError(f"{gpus} GPUs but {len(device_files)} device files")
    note = None
    if not device_files:
        if gpus > len(STAND_IN_DEVICES):
            raise ValueError(
                f"no /dev/nvidiaN device files, and at most {len(STAND_IN_DEVICES)} stand-ins for {gpus} GPUs"
            )
        device_files = list(STAND_IN_DEVICES[:gpus])
        note = (
            f"no /dev/nvidiaN device files for {gpus} GPU(s): gres.conf names stand-in character devices "
            f"({', '.join(device_files)}); SLURM counts and assigns the GPUs (CUDA_VISIBLE_DEVICES), "
            "binds no device"
        )
    lines = [f"Name=gpu File={f}" for f in device_files]
    return f"{MARK}\n" + "".join(ln + "\n" for ln in lines), note


def cgroup_fs_type(path: str = "/sys/fs/cgroup") -> str | None:
    """The file system type at path as `stat -f` names it (tmpfs, cgroup2fs, sysfs, ...), or None."""
    try:
        out = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def why_cgroup_stub(fs_type: str | None) -> str | None:
    """Why slurmd needs the stub cgroup.conf here, or None. slurmd 22.05 initializes its cgroup
    plugin at start even with proctrack/linuxproc and task/none, and CgroupPlugin=autodetect
    fails ("No filesystem mounted on /sys/fs/cgroup") unless it finds cgroup v1 (a tmpfs) or v2."""
    if fs_type in ("tmpfs", "cgroup2fs"):
        return None
    return (
        f"/sys/fs/cgroup is {'a ' + fs_type + ' file system' if fs_type else 'not there'}, no cgroup v1 or v2: "
        f"cgroup.conf points slurmd's cgroup plugin at an empty directory (nothing of this cluster uses cgroups)"
    )


def cgroup_stub_text(mountpoint: Path) -> str:
    """cgroup.conf that lets slurmd start without a cgroup file system: cgroup/v1 on an empty
    directory. Only for this cluster's plugins (proctrack/linuxproc, task/none, no
    jobacct_gather), which never create a cgroup."""
    return f"{MARK}\nCgroupPlugin=cgroup/v1\nCgroupMountpoint={mountpoint}\n"


def slurm_conf_text(
    *,
    cluster_name: str,
    ctl: str,
    node_lines: list[str],
    partition: str,
    kill_wait_s: int,
    workdir: Path,
    gpus: int = 0,
) -> str:
    """/etc/slurm/slurm.conf of a LocalSlurm cluster (node_lines without their GRES: `gpus` > 0
    adds GresTypes=gpu and Gres=gpu:N to each node)."""
    w = workdir
    if gpus > 0:
        node_lines = [
            ln.replace(" State=", f" Gres=gpu:{gpus} State=", 1) if " State=" in ln else f"{ln} Gres=gpu:{gpus}"
            for ln in node_lines
        ]
    # (not AccountingStorageTRES=gres/gpu: without slurmdbd slurmctld refuses to start with it)
    gres = "GresTypes=gpu\n" if gpus > 0 else ""
    return f"""{MARK}
ClusterName={cluster_name}
{ctl}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
# squeue must still see a finished job when the executor plugin polls (it asks for >= 120 s)
MinJobAge=600
KillWait={kill_wait_s}
SlurmdParameters=config_overrides
StateSaveLocation={w / "state"}
SlurmdSpoolDir={w / "spool"}/slurmd.%n
SlurmctldPidFile={w / "state"}/slurmctld.pid
SlurmdPidFile={w / "spool"}/slurmd.%n.pid
SlurmctldLogFile={w / "log"}/slurmctld.log
SlurmdLogFile={w / "log"}/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
{gres}{chr(10).join(node_lines)}
PartitionName={partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class LocalSlurm:
    """One controller and `nodes` compute nodes on this machine (see the module doc)."""

    def __init__(
        self,
        workdir: os.PathLike | str,
        nodes: int = 1,
        partition: str = "debug",
        kill_wait_s: int = 20,
        gpus: int = 0,
        cgroup_stub: bool | None = None,
    ):
        if nodes not in (1, 2):
            raise ValueError("nodes must be 1 or 2")
        if gpus < 0:
            raise ValueError("gpus must be >= 0")
        self.workdir = Path(workdir).resolve()
        self.nodes = nodes
        # GPUs a node, as GRES gpu (0: none, no gres.conf)
        self.gpus = gpus
        self.gres_note: str | None = None
        self._gres_backup: Path | None = None
        # cgroup.conf for a machine without a cgroup file system: None decides by /sys/fs/cgroup
        self.cgroup_stub = cgroup_stub
        self.cgroup_note: str | None = None
        self._cgroup_backup: Path | None = None
        self.partition = partition
        self.kill_wait_s = kill_wait_s
        self.procs: dict[str, subprocess.Popen] = {}
        self.node_names: list[str] = []
        self._conf_backup: Path | None = None
        self._hosts_added = False
        self._netns: list[str] = []
        self._bridge = False
        self._lock = None
        self.hostname = socket.gethostname().split(".")[0]
        # every process of this cluster's jobs carries it in SLURM_CLUSTER_NAME
        self.cluster_name = f"scalestudy-test-{os.getpid()}"

    # ---- start ------------------------------------------------------------------------
    def start(self, timeout_s: float = 90) -> "LocalSlurm":
        why = why_unusable()
        if why:
            raise RuntimeError(why)
        self._lock = open(LOCK, "w")
        end = time.monotonic() + 1800
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise RuntimeError(f"another test cluster holds {LOCK} for 30 min") from None
                time.sleep(2)
        for d in ("state", "spool", "log"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        # slurmctld starts clean (-c), but refuses a state directory that names another cluster:
        # a workdir used before (`up` twice with the default --workdir) names the last one
        (self.workdir / "state" / "clustername").unlink(missing_ok=True)
        try:
            self._start_munge()
            if self.nodes == 2:
                self._make_network()
                self._check_network()
            self._write_conf()
            self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-i"])
            self._wait_for(
                lambda: _run(["scontrol", "ping"], check=False).stdout.count("UP") >= 1,
                timeout_s,
                "slurmctld to answer",
            )
            self._start_slurmd()
            self._wait_for(self._all_idle, timeout_s, f"{self.nodes} node(s) to be idle")
        except BaseException:
            self.stop()
            raise
        self._save_state()
        return self

    def _start_munge(self) -> None:
        if munge_answers():
            return  # a munged of the machine's own: use it, never stop it
        MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        shutil.chown(MUNGE_SOCKET.parent, "munge", "munge")
        os.chmod(MUNGE_SOCKET.parent, 0o755)
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            _run(["mungekey", "--create"] if shutil.which("mungekey") else ["create-munge-key"])
            shutil.chown(key, "munge", "munge")
            os.chmod(key, 0o400)
        # munged runs as the munge user, which cannot enter a private test directory: its log
        # and pid file stay in the package's own places
        for d in (Path("/var/lib/munge"), Path("/var/log/munge")):
            d.mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "munge", "munge")
        if shutil.which("setpriv"):
            as_munge = ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups"]
        else:  # no util-linux setpriv (a minimal image): drop to the munge user in Python, then exec
            as_munge = [
                sys.executable,
                "-c",
                "import os, pwd, sys; u = pwd.getpwnam('munge'); "
                "os.initgroups('munge', u.pw_gid); os.setgid(u.pw_gid); os.setuid(u.pw_uid); "
                "os.execvp(sys.argv[1], sys.argv[1:])",
            ]
        self._spawn("munged", [*as_munge, "munged", "-F", "--force"])
        self._wait_for(munge_answers, 30, "munged to answer")

    def _make_network(self) -> None:
        """A bridge with the host at .1 and one namespace a node at .11, .12."""
        tag = f"{os.getpid() % 100000}"
        _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        self._bridge = True
        _run(["ip", "addr", "add", f"{HOST_ADDR}/24", "dev", BRIDGE])
        _run(["ip", "link", "set", BRIDGE, "up"])
        for i in range(1, self.nodes + 1):
            ns, veth = f"ssn{i}-{tag}", f"ssv{i}-{tag}"
            _run(["ip", "netns", "add", ns])
            self._netns.append(ns)
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{SUBNET}.{10 + i}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        self.node_names = [f"ssnode{i}" for i in range(1, self.nodes + 1)]
        lines = [f"{SUBNET}.{10 + i} {n}" for i, n in enumerate(self.node_names, 1)]
        lines.append(f"{HOST_ADDR} ssctl")
        text = HOSTS.read_text()
        HOSTS.write_text(text.rstrip("\n") + "\n" + "".join(f"{ln} {MARK}\n" for ln in lines))
        self._hosts_added = True

    def _check_network(self) -> None:
        """Node 1 must reach node 2 through the bridge (a host firewall may drop bridged traffic)."""
        listen = (
            "import socket; s = socket.socket(); s.bind(('', 29399)); s.listen(); "
            "s.settimeout(10); c, _ = s.accept(); c.sendall(b'ok')"
        )
        connect = (
            f"import socket; c = socket.create_connection(('{SUBNET}.12', 29399), timeout=5); print(c.recv(2).decode())"
        )
        server = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self._netns[1]}", sys.executable, "-c", listen],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(20):
                out = subprocess.run(
                    ["nsenter", f"--net=/run/netns/{self._netns[0]}", sys.executable, "-c", connect],
                    capture_output=True,
                    text=True,
                    timeout=15,
                )
                if out.stdout.strip() == "ok":
                    return
                time.sleep(0.25)
            raise TwoNodesUnusable(
                f"node 1 cannot reach node 2 across the bridge {BRIDGE}: "
                f"{out.stderr.strip().splitlines()[-1:] or out.stdout}"
            )
        finally:
            server.kill()
            server.wait()

    def _write_conf(self) -> None:
        hw = node_hardware()
        hw_text = " ".join(f"{k}={v}" for k, v in hw.items())
        if self.nodes == 1:
            self.node_names = [self.hostname]
            ctl = f"SlurmctldHost={self.hostname}(127.0.0.1)"
            node_lines = [f"NodeName={self.hostname} NodeAddr=127.0.0.1 {hw_text} State=UNKNOWN"]
        else:
            ctl = f"SlurmctldHost={self.hostname}({HOST_ADDR})"
            node_lines = [
                f"NodeName={n} NodeAddr={SUBNET}.{10 + i} NodeHostname={n} {hw_text} State=UNKNOWN"
                for i, n in enumerate(self.node_names, 1)
            ]
        conf = slurm_conf_text(
            cluster_name=self.cluster_name,
            ctl=ctl,
            node_lines=node_lines,
            partition=self.partition,
            kill_wait_s=self.kill_wait_s,
            workdir=self.workdir,
            gpus=self.gpus,
        )
        SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
        if SLURM_CONF.exists() and MARK not in SLURM_CONF.read_text():
            self._conf_backup = self.workdir / "slurm.conf.before"
            shutil.copy2(SLURM_CONF, self._conf_backup)
        SLURM_CONF.write_text(conf)
        if self.gpus > 0:
            gres, self.gres_note = gres_conf_text(self.gpus, gpu_device_files(self.gpus))
            if GRES_CONF.exists() and MARK not in GRES_CONF.read_text(errors="replace"):
                self._gres_backup = self.workdir / "gres.conf.before"
                shutil.copy2(GRES_CONF, self._gres_backup)
            GRES_CONF.write_text(gres)
        if self.cgroup_stub is None:
            self.cgroup_note = why_cgroup_stub(cgroup_fs_type())
        elif self.cgroup_stub:
            self.cgroup_note = "asked for: cgroup.conf points slurmd's cgroup plugin at an empty directory"
        if self.cgroup_note:
            stub = self.workdir / "cgroup-stub"
            stub.mkdir(exist_ok=True)
            if CGROUP_CONF.exists() and MARK not in CGROUP_CONF.read_text(errors="replace"):
                self._cgroup_backup = self.workdir / "cgroup.conf.before"
                shutil.copy2(CGROUP_CONF, self._cgroup_backup)
            CGROUP_CONF.write_text(cgroup_stub_text(stub))
        # jobs of this cluster must not follow a SLURM_CONF of the caller's
        os.environ.pop("SLURM_CONF", None)

    def _start_slurmd(self) -> None:
        for name in self.node_names:
            (self.workdir / "spool" / f"slurmd.{name}").mkdir(parents=True, exist_ok=True)
        if self.nodes == 1:
            self._spawn("slurmd", ["slurmd", "-D", "-N", self.hostname])
            return
        for ns, name in zip(self._netns, self.node_names):
            # its own network namespace (address) and UTS namespace (hostname): a node of its own
            # nsenter, not `ip netns exec`: that one remounts /sys, hiding the cgroup tree slurmd wants
            self._spawn(
                f"slurmd-{name}",
                [
                    "nsenter",
                    f"--net=/run/netns/{ns}",
                    "unshare",
                    "--uts",
                    "sh",
                    "-c",
                    f"hostname {name} && exec slurmd -D -N {name}",
                ],
            )

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.workdir / "log" / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()

    def _wait_for(self, ok, timeout_s: float, what: str) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited ({p.returncode}) while waiting for {what}; "
                        f"see {self.workdir / 'log'}:\n{self.logs_tail()}"
                    )
            if ok():
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}:\n{self.logs_tail()}")

    def _all_idle(self) -> bool:
        out = _run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False).stdout.split()
        states = dict(zip(out[::2], out[1::2]))
        return len(states) == self.nodes and all(s == "idle" for s in states.values())

    # ---- use ----------------------------------------------------------------------------
    def env(self) -> dict:
        env = dict(os.environ)
        env.pop("SLURM_CONF", None)
        return env

    def job_state(self, job_id: str | int) -> str | None:
        out = _run(["squeue", "-h", "--states=all", "-j", str(job_id), "-o", "%T"], check=False).stdout.strip()
        return out or None

    def wait_job(self, job_id: str | int, timeout_s: float = 120) -> str:
        end = time.monotonic() + timeout_s
        state = None
        while time.monotonic() < end:
            state = self.job_state(job_id)
            if state in (
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
                "PREEMPTED",
                "NODE_FAIL",
                "OUT_OF_MEMORY",
                "BOOT_FAIL",
                "DEADLINE",
            ):
                return state
            time.sleep(0.5)
        raise TimeoutError(f"job {job_id} still {state} after {timeout_s:.0f} s")

    def logs_tail(self, n: int = 15) -> str:
        out = []
        for p in sorted((self.workdir / "log").glob("*.log")) + sorted((self.workdir / "log").glob("*.out")):
            lines = p.read_text(errors="replace").splitlines()[-n:]
            if lines:
                out.append(f"--- {p.name}\n" + "\n".join(lines))
        return "\n".join(out)

    # ---- stop ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Cancel this cluster's jobs, then stop the daemons this object started (by pid,
        newest first) and undo its changes to the machine."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            _run(["scancel", "--full", "--partition", self.partition], check=False)
            end = time.monotonic() + self.kill_wait_s + 15
            while time.monotonic() < end and _run(["squeue", "-h", "-t", "R,CG,PD,S"], check=False).stdout.strip():
                time.sleep(0.5)
        self._kill_job_leftovers()
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        self.procs.clear()
        for ns in self._netns:
            _run(["ip", "netns", "del", ns], check=False)
        self._netns.clear()
        if self._bridge:
            _run(["ip", "link", "del", BRIDGE], check=False)
            self._bridge = False
        if self._hosts_added:
            HOSTS.write_text("".join(ln + "\n" for ln in HOSTS.read_text().splitlines() if MARK not in ln))
            self._hosts_added = False
        if SLURM_CONF.exists() and MARK in SLURM_CONF.read_text():
            if self._conf_backup and self._conf_backup.exists():
                shutil.copy2(self._conf_backup, SLURM_CONF)
            else:
                SLURM_CONF.unlink()
        for conf, backup in ((GRES_CONF, self._gres_backup), (CGROUP_CONF, self._cgroup_backup)):
            if conf.exists() and MARK in conf.read_text(errors="replace"):
                if backup and backup.exists():
                    shutil.copy2(backup, conf)
                else:
                    conf.unlink()
        state = self.workdir / "cluster.json"
        state.unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.close()  # releases the lock
            self._lock = None

    def _kill_job_leftovers(self) -> None:
        """Processes of this cluster's jobs that SLURM lost: proctrack/linuxproc follows the process
        tree, and a job process whose parent died (a shell killed by SIGTERM) is reparented and
        escapes SLURM's SIGKILL. They are found by this cluster's name in their environment."""
        mark = f"SLURM_CLUSTER_NAME={self.cluster_name}".encode()
        found = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                if mark in (d / "environ").read_bytes().split(b"\0"):
                    found.append(int(d.name))
            except OSError:
                continue
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            if sig == signal.SIGTERM and found:
                time.sleep(2)

    # for the command line: remember what was started, to stop it from another process
    def _save_state(self) -> None:
        (self.workdir / "cluster.json").write_text(
            json.dumps(
                {
                    "pids": {k: p.pid for k, p in self.procs.items()},
                    "netns": self._netns,
                    "bridge": self._bridge,
                    "hosts": self._hosts_added,
                    "conf_backup": str(self._conf_backup or ""),
                    "partition": self.partition,
                    "cluster_name": self.cluster_name,
                    "gpus": self.gpus,
                    "gres_backup": str(self._gres_backup or ""),
                    "cgroup_backup": str(self._cgroup_backup or ""),
                }
            )
        )

    @classmethod
    def stop_saved(cls, workdir: Path) -> None:
        state = json.loads((workdir / "cluster.json").read_text())
        _run(["scancel", "--full", "--partition", state["partition"]], check=False)
        time.sleep(3)
        for name, pid in reversed(list(state["pids"].items())):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(2)
        self = cls(workdir)
        self._netns, self._bridge, self._hosts_added = state["netns"], state["bridge"], state["hosts"]
        self._conf_backup = Path(state["conf_backup"]) if state["conf_backup"] else None
        self.cluster_name = state["cluster_name"]
        self._gres_backup = Path(state["gres_backup"]) if state.get("gres_backup") else None
        self._cgroup_backup = Path(state["cgroup_backup"]) if state.get("cgroup_backup") else None
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("up", "down"))
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--gpus", type=int, default=0, help="GPUs a node, as GRES gpu (default 0: none)")
    ap.add_argument("--timeout", type=float, default=90, help="seconds to wait for each daemon (default 90)")
    ap.add_argument(
        "--cgroup-stub",
        choices=("auto", "yes", "no"),
        default="auto",
        help="cgroup.conf on an empty directory for slurmd (auto: where /sys/fs/cgroup has no cgroups)",
    )
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "scalestudy-slurm"))
    args = ap.parse_args(argv)
    workdir = Path(args.workdir)
    if args.action == "up":
        # the daemons must outlive this process: detach them from it
        stub = {"auto": None, "yes": True, "no": False}[args.cgroup_stub]
        cluster = LocalSlurm(workdir, nodes=args.nodes, gpus=args.gpus, cgroup_stub=stub).start(timeout_s=args.timeout)
        for note in (cluster.gres_note, cluster.cgroup_note):
            if note:
                print(f"note: {note}")
        gres = f"; GRES gpu:{cluster.gpus} a node ({GRES_CONF})" if cluster.gpus else ""
        print(f"up: nodes {' '.join(cluster.node_names)}{gres}; state and logs in {workdir}")
        return 0
    LocalSlurm.stop_saved(workdir)
    print("down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
