"""The GPU (GRES) configuration that tests/launch/slurm_cluster.py writes for `up --gpus N`:
slurm.conf's GresTypes and the node's Gres, and gres.conf with one File= a GPU: /dev/nvidiaK where
those device files exist, else stand-in character devices. Text only: no SLURM, no root."""

from pathlib import Path

import pytest
import slurm_cluster as sc

NODE = "NodeName=gpu1 NodeAddr=127.0.0.1 CPUs=16 RealMemory=130000 State=UNKNOWN"


def conf(gpus: int) -> str:
    return sc.slurm_conf_text(
        cluster_name="scalestudy-test-1",
        ctl="SlurmctldHost=gpu1(127.0.0.1)",
        node_lines=[NODE],
        partition="debug",
        kill_wait_s=20,
        workdir=Path("/tmp/w"),
        gpus=gpus,
    )


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_one_gpu_adds_gres_types_and_the_nodes_gres():
    text = conf(1)
    assert "GresTypes=gpu" in lines(text)
    # slurmctld without slurmdbd refuses to start with AccountingStorageTRES=gres/gpu
    assert "AccountingStorageTRES" not in text
    assert "NodeName=gpu1 NodeAddr=127.0.0.1 CPUs=16 RealMemory=130000 Gres=gpu:1 State=UNKNOWN" in lines(text)
    assert "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" in lines(text)
    assert lines(text)[0] == sc.MARK
    # GresTypes before the node that names a GRES
    first_node = next(i for i, ln in enumerate(lines(text)) if ln.startswith("NodeName="))
    assert lines(text).index("GresTypes=gpu") < first_node


def test_no_gpus_leaves_the_configuration_as_before():
    text = conf(0)
    assert "GresTypes" not in text and "Gres=" not in text and "AccountingStorageTRES" not in text
    assert NODE in lines(text)
    for key in (
        "SelectType=select/cons_tres",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "AccountingStorageType=accounting_storage/none",
        "MinJobAge=600",
        "KillWait=20",
        "StateSaveLocation=/tmp/w/state",
        "SlurmdSpoolDir=/tmp/w/spool/slurmd.%n",
    ):
        assert key in lines(text)


def test_gres_conf_names_the_device_file_of_one_gpu():
    text, note = sc.gres_conf_text(1, ["/dev/nvidia0"])
    assert lines(text) == [sc.MARK, "Name=gpu File=/dev/nvidia0"]
    assert note is None


def test_gres_conf_without_device_files_names_stand_ins_and_says_so():
    """slurmd 22.05 drops a file-less GPU and wants a character device: /dev/null stands in."""
    text, note = sc.gres_conf_text(1, None)
    assert lines(text) == [sc.MARK, "Name=gpu File=/dev/null"]
    assert note and "/dev/null" in note and "no /dev/nvidiaN" in note
    text, _ = sc.gres_conf_text(2, None)
    assert lines(text)[1:] == ["Name=gpu File=/dev/null", "Name=gpu File=/dev/zero"]
    with pytest.raises(ValueError):
        sc.gres_conf_text(0, None)
    with pytest.raises(ValueError):
        sc.gres_conf_text(2, ["/dev/nvidia0"])
    with pytest.raises(ValueError):
        sc.gres_conf_text(len(sc.STAND_IN_DEVICES) + 1, None)


def test_device_files_in_numeric_order(tmp_path):
    for name in ("nvidia10", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia0"):
        (tmp_path / name).touch()
    assert sc.gpu_device_files(1, tmp_path) == [str(tmp_path / "nvidia0")]
    assert sc.gpu_device_files(3, tmp_path) == [str(tmp_path / n) for n in ("nvidia0", "nvidia2", "nvidia10")]
    assert sc.gpu_device_files(4, tmp_path) is None
    assert sc.gpu_device_files(1, tmp_path / "none") is None


def test_the_command_line_takes_gpus(monkeypatch, tmp_path):
    seen = {}

    class Fake:
        def __init__(self, workdir, nodes=1, gpus=0, cgroup_stub=None):
            seen.update(workdir=workdir, nodes=nodes, gpus=gpus)
            self.node_names, self.gpus, self.gres_note, self.cgroup_note = ["gpu1"], gpus, None, None
            seen["cgroup_stub"] = cgroup_stub

        def start(self, timeout_s=90):
            seen["timeout_s"] = timeout_s
            return self

    monkeypatch.setattr(sc, "LocalSlurm", Fake)
    assert sc.main(["up", "--gpus", "1", "--timeout", "60", "--workdir", str(tmp_path)]) == 0
    assert seen == {"workdir": tmp_path, "nodes": 1, "gpus": 1, "timeout_s": 60, "cgroup_stub": None}


def test_a_cgroup_stub_only_where_slurmd_finds_no_cgroup_file_system(tmp_path):
    """slurmd 22.05 starts its cgroup plugin even with proctrack/linuxproc and task/none, and
    fails where /sys/fs/cgroup holds neither cgroup v1 (tmpfs) nor v2 (a chroot, a sandbox)."""
    assert sc.why_cgroup_stub("tmpfs") is None
    assert sc.why_cgroup_stub("cgroup2fs") is None
    assert "sysfs" in sc.why_cgroup_stub("sysfs")
    assert "not there" in sc.why_cgroup_stub(None)
    assert lines(sc.cgroup_stub_text(tmp_path / "cgroup-stub")) == [
        sc.MARK,
        "CgroupPlugin=cgroup/v1",
        f"CgroupMountpoint={tmp_path / 'cgroup-stub'}",
    ]
