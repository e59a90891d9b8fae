"""Every parallel layout gives the loss curve of one process (float32 on CPU, gloo).

Plain SGD: unlike Adam, it does not normalise gradients away, so a gradient off by a constant
factor (a sum where a mean belongs, a missing microbatch scale) changes the curve.

The ranks are forked from a warm server that imported torch once (scalestudy.launch.warm_workers,
what the workflow's CPU runs use); a given --peak-tflops skips the CPU peak calibration, which only
MFU reads. local_workers' and torchrun's own start of the ranks is tested by the fault, launch and
SLURM tests."""

import pytest
from conftest import losses_by_step, warm_workers

pytestmark = pytest.mark.multiproc

# 2 of the tiny model's 8 layers (4 where a run has 4 pipeline stages: one layer a stage)
COMMON = [
    "train",
    "--precision",
    "fp32",
    "--seq-len",
    "32",
    "--global-batch",
    "8",
    "--micro-batch",
    "1",
    "--warmup-iters",
    "1",
    "--measured-iters",
    "2",
    "--quiet",
    "--optimizer",
    "sgd",
    "--lr",
    "0.5",
    "--peak-tflops",
    "1",
]
# what the one-process reference must share with a layout: the model's depth and the optimizer
MODEL_FLAGS = ("--n-layers", "--optimizer", "--lr")
FOUR = ["--n-layers", "4"]

LAYOUTS = {
    # world size 2
    "fsdp-2": (2, []),
    "ddp-2": (2, ["--dp-replicate", "2"]),
    "tp-2": (2, ["--tp", "2"]),
    "tp-sp-2": (2, ["--tp", "2", "--sequence-parallel"]),
    "pp-gpipe-2": (2, ["--pp", "2", "--pp-schedule", "gpipe"]),
    "pp-1f1b-2": (2, ["--pp", "2", "--pp-schedule", "1f1b"]),
    "pp-interleaved-2": (2, FOUR + ["--pp", "2", "--pp-schedule", "interleaved_1f1b", "--pp-stages-per-rank", "2"]),
    "fsdp-reshard-2": (2, ["--reshard-after-forward", "--fsdp-forward-prefetch", "0"]),
    "fsdp-ac-2": (2, ["--activation-checkpointing", "full"]),
    "fsdp-adamw-2": (2, ["--optimizer", "adamw", "--lr", "1e-3"]),
    # world size 4
    "fsdp-4": (4, []),
    "hsdp-4": (4, ["--nodes", "2", "--dp-replicate", "2"]),
    "fsdp-tp-4": (4, ["--tp", "2"]),
    "fsdp-tp-sp-4": (4, ["--tp", "2", "--sequence-parallel"]),
    "fsdp-pp-4": (4, ["--pp", "2"]),
    "tp-pp-4": (4, ["--tp", "2", "--pp", "2"]),
    "pp-1f1b-4": (4, FOUR + ["--pp", "4"]),
    "fsdp-pp-interleaved-4": (
        4,
        FOUR + ["--pp", "2", "--pp-schedule", "interleaved_1f1b", "--pp-stages-per-rank", "2"],
    ),
    "ddp-tp-4": (4, ["--nodes", "2", "--dp-replicate", "2", "--tp", "2"]),
    # combinations that need 8 processes
    "hsdp-tp-8": (8, ["--nodes", "2", "--dp-replicate", "2", "--tp", "2"]),
    "fsdp-tp-pp-8": (8, ["--tp", "2", "--pp", "2"]),
}


def layout_args(name: str) -> tuple[int, list[str]]:
    """A layout's process count and arguments, 2 layers unless it says otherwise; tensor-parallel
    layouts take microbatches of 2 sequences (DTensor's dispatch costs CPU by the microbatch): the
    one-process reference takes 1, so they also show that the microbatch size leaves the curve as
    it is."""
    nproc, extra = LAYOUTS[name]
    extra = extra if "--n-layers" in extra else ["--n-layers", "2", *extra]
    return nproc, [*extra, "--micro-batch", "2"] if "--tp" in extra else extra


def model_args(args: list[str]) -> list[str]:
    """The depth and optimizer flags among a layout's arguments, with their values."""
    return [w for f in MODEL_FLAGS if f in args for w in (f, args[args.index(f) + 1])]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The one-process loss curve of a model depth and optimizer, run once each."""
    curves = {}

    def curve(args: list[str]) -> list[float]:
        if tuple(args) not in curves:
            d = tmp_path_factory.mktemp("ref") / "run"
            res = warm_workers(1, COMMON + args + ["--run-dir", str(d)])
            assert res.returncode == 0, res.stdout + res.stderr
            curves[tuple(args)] = losses_by_step(d)
        return curves[tuple(args)]

    return curve


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_layout_matches_single_process(name, reference, tmp_path):
    nproc, extra = layout_args(name)
    ref = reference(model_args(extra))
    nodes = int(extra[extra.index("--nodes") + 1]) if "--nodes" in extra else 1
    d = tmp_path / "run"
    res = warm_workers(nproc, COMMON + extra + ["--procs-per-node", str(nproc // nodes), "--run-dir", str(d)])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    losses = losses_by_step(d)
    assert len(losses) == len(ref) == 3
    # AdamW's first steps are nearly sign(gradient): float32 reordering flips a few tiny
    # components, so its tolerance is looser
    rel = 1e-4 if "adamw" in name else 1e-5
    assert losses == pytest.approx(ref, rel=rel, abs=1e-6), name
    assert max(losses) - min(losses) > 1e-3  # the curve moves: the test can tell layouts apart
