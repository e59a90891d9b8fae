"""Host cost of one emulated rank's FSDP2 step against the emulated world size, on CPU.

Why the paper-rank share of Llama-2 7B at 2048 GPUs is 1.23 s where 8..1024 GPUs give 0.73-0.79 s:
torch's fake process group writes an all-gather's output one chunk at a time
(c10d::FakeProcessGroup::_allgather_base: `for chunk in output.chunk(world_size): chunk.copy_(input)`),
so each of FSDP2's all-gathers costs `world_size` copy dispatches (on a GPU, kernel launches).
This script runs the harness's Trainer (`comm: fake`, FSDP2, one block a unit, the 7B's 32 layers
with CPU-sized dims) as rank 0 of worlds of W ranks and reports per W:

    python benchmarks/fake_pg_host_cost.py steps OUT.json [--worlds 256 512 1024 2048 4096]
    python benchmarks/fake_pg_host_cost.py profile OUT.txt [--world 2048] [--one-copy]
    python benchmarks/fake_pg_host_cost.py collective OUT.json [--worlds ...]

steps: the median wall time of a training step (CPU: all of it is host work) with the fake
backend's collectives and with scalestudy's one-copy ones (harness/fake_comm.py), the number
of copy dispatches a step, and the elements of all-gather output a step (FSDP2 pads every
parameter's first dimension to a multiple of W; the small dims here are padded far more than the
7B's, so the elements are shown too). profile: torch.profiler's top CPU operators of one W=2048
step (--one-copy: with scalestudy's collectives). collective: one all-gather and one
reduce-scatter of a fixed 2 MiB bf16 buffer cut into W chunks, the backend's and scalestudy's.
Each world size runs in a forked child (a process joins one fake world). CPU only, no device.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

MODEL = {
    "n_layers": 32,
    "dim": 64,
    "n_heads": 4,
    "n_kv_heads": 4,
    "ffn_dim": 176,
    "vocab_size": 512,
    "source": "benchmarks/fake_pg_host_cost.py: the 7B's 32 layers, CPU-sized dims",
}
NAME = "host-cost-32"
WORLDS = (256, 512, 1024, 2048, 4096)


def _catalog_file(tmp: Path) -> Path:
    f = tmp / "models.yaml"
    f.write_text(json.dumps({"models": {NAME: MODEL}}))  # JSON is YAML
    return f


def _spec(world: int):
    from scalestudy.spec.run import RunSpec

    return RunSpec.from_dict(
        dict(
            model=NAME,
            seq_len=16,
            micro_batch=2,
            precision="bf16",
            optimizer="adamw",
            nodes=world // 8,
            procs_per_node=8,
            global_batch=2 * world,
            comm="fake",
            emulate_rank=0,
            warmup_iters=2,
            measured_iters=5,
        )
    )


def _all_gather_numel(model, world: int) -> int:
    """Elements of all-gather output a step: FSDP2 pads each parameter's dim 0 to a multiple of W."""
    return sum(math.ceil(p.shape[0] / world) * world * (p.numel() // p.shape[0]) for p in model.parameters())


def _trainer(world: int, one_copy: bool):
    import torch

    from scalestudy.harness import fake_comm
    from scalestudy.harness.parallel_dims import ParallelDims
    from scalestudy.harness.train import Trainer

    spec = _spec(world)
    fake_comm.init_fake_process_group(spec)
    device = torch.device("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        fake_comm.install_fills(fake_comm.probe_fills(device))
    if one_copy:
        fake_comm.install_one_copy_collectives()
    return Trainer(spec, ParallelDims.from_spec(spec, world), device)


def _count_copies(trainer, step: int) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(step)
    return sum(e.count for e in prof.key_averages() if e.key == "aten::copy_")


def _steps_child(world: int, one_copy: bool, out: Path) -> None:
    import torch

    torch.set_num_threads(1)
    trainer = _trainer(world, one_copy)
    times = []
    for i in range(12):
        t0 = time.perf_counter()
        trainer.step(i)
        times.append(time.perf_counter() - t0)
    copies = _count_copies(trainer, 12)
    steps = times[2:]
    out.write_text(
        json.dumps(
            {
                "world": world,
                "collectives": "one-copy" if one_copy else "backend",
                "step_s": statistics.median(steps),
                "min_step_s": min(steps),
                "steps_s": steps,
                "copy_dispatches": copies,
                "all_gather_output_elements": _all_gather_numel(trainer.parts[0], world),
            }
        )
    )


def _profile_child(world: int, one_copy: bool, out: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    trainer = _trainer(world, one_copy)
    for i in range(2):
        trainer.step(i)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(2)
    out.write_text(prof.key_averages().table(sort_by="cpu_time_total", row_limit=15, max_name_column_width=40))


def _collective_child(world: int, out: Path) -> None:
    import torch
    import torch.distributed as dist

    from scalestudy.harness import fake_comm

    torch.set_num_threads(1)
    fake_comm.init_fake_process_group(_spec(world))
    n = 1 << 20
    shard, full = torch.randn(n // world, dtype=torch.bfloat16), torch.randn(n, dtype=torch.bfloat16)
    gathered, scattered = torch.empty_like(full), torch.empty_like(shard)

    def per_call(fn) -> float:
        fn()
        t0 = time.perf_counter()
        for _ in range(50):
            fn()
        return (time.perf_counter() - t0) / 50

    def both() -> dict:
        return {
            "all_gather_s": per_call(lambda: dist.all_gather_single(gathered, shard)),
            "reduce_scatter_s": per_call(lambda: dist.reduce_scatter_single(scattered, full)),
        }

    backend = both()
    fake_comm.install_one_copy_collectives()
    one = both()
    out.write_text(
        json.dumps(
            {
                "world": world,
                "elements": n,
                "dtype": "bf16",
                "backend": backend,
                "one_copy": one,
                "backend_all_gather_per_rank_s": (backend["all_gather_s"] - one["all_gather_s"]) / world,
            }
        )
    )


def _in_child(target, *args) -> None:
    child = multiprocessing.get_context("fork").Process(target=target, args=args)
    child.start()
    child.join()
    if child.exitcode:
        sys.exit(f"{target.__name__}{args[:-1]} failed (exit code {child.exitcode})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["steps", "profile", "collective"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--worlds", type=int, nargs="+", default=list(WORLDS))
    ap.add_argument("--world", type=int, default=2048, help="profile: the world size")
    ap.add_argument("--one-copy", action="store_true", help="profile: with scalestudy's one-copy collectives")
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SCALESTUDY_CATALOG"] = str(_catalog_file(Path(tmp)))
        part = Path(tmp) / "part.json"
        if a.what == "profile":
            _in_child(_profile_child, a.world, a.one_copy, a.out)
            print(a.out.read_text())
            return
        rows = []
        for w in a.worlds:
            for one_copy in (False, True) if a.what == "steps" else (None,):
                if a.what == "steps":
                    _in_child(_steps_child, w, one_copy, part)
                else:
                    _in_child(_collective_child, w, part)
                rows.append(json.loads(part.read_text()))
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "steps_s"}), flush=True)
        a.out.write_text(json.dumps({"what": a.what, "torch": _torch_version(), "rows": rows}, indent=1) + "\n")


def _torch_version() -> str:
    import torch

    return torch.__version__


if __name__ == "__main__":
    main()
