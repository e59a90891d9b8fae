"""Records what one rank computes and holds for several layouts, in a real multi-process gloo run
(`python tests/harness/forked_ranks.py --nproc=4 tests/harness/rank_share_worker.py real OUT`, or the
same under `torchrun --nproc_per_node 4`) or in one process with fake
communication (`python tests/harness/rank_share_worker.py fake OUT`, every rank listed in CASES).
Per (layout, rank) it writes OUT/LAYOUT-rank-R.json: each parameter's local shape and dtype, the
operator inputs and outputs of one training step (every module's forward: name, input and output
local shapes; counted), and the bytes of parameters and optimizer state the rank holds.
tests/harness/test_rank_share.py compares the two; this script asserts nothing itself."""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections import Counter
from pathlib import Path

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from scalestudy.harness.parallel_dims import ParallelDims  # noqa: E402
from scalestudy.harness.trainer import Trainer  # noqa: E402
from scalestudy.spec.run import RunSpec  # noqa: E402

WORLD = 4
BASE = dict(
    model="tiny",
    n_layers=2,
    seq_len=32,
    micro_batch=1,
    precision="fp32",
    optimizer="adamw",
    nodes=1,
    procs_per_node=WORLD,
    warmup_iters=0,
    measured_iters=1,
)
# layout: (spec fields, ranks the fake process emulates)
CASES = {
    "fsdp": ({}, [1]),
    "hsdp": ({"nodes": 2, "procs_per_node": 2, "dp_replicate": 2}, [3]),
    "tp-sp": ({"tp": 2, "sequence_parallel": True}, [1]),
    "pp-1f1b": ({"pp": 2, "pp_microbatches": 4, "global_batch": 8}, [0, 3]),
    "tp-pp-gpipe": ({"tp": 2, "pp": 2, "pp_schedule": "gpipe", "pp_microbatches": 2}, [0, 3]),
}


def _shape(x):
    from torch.distributed.tensor import DTensor

    if isinstance(x, DTensor):
        return ["D", list(x.to_local().shape), str(x.to_local().dtype)]
    if isinstance(x, torch.Tensor):
        return [list(x.shape), str(x.dtype)]
    if isinstance(x, (tuple, list)):
        return [_shape(v) for v in x if isinstance(v, (torch.Tensor, tuple, list))]
    return None


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def record(case: str, spec: RunSpec, out: Path, rank: int) -> None:
    dims = ParallelDims.from_spec(spec, dist.get_world_size())
    trainer = Trainer(spec, dims, torch.device("cpu"))
    trainer.step(0)  # the first step may run a pipeline's shape inference: record the second
    calls: Counter = Counter()
    hooks = []
    for part in trainer.parts:
        for name, mod in part.named_modules():

            def hook(m, args, output, name=name):
                calls[json.dumps([name, _shape(args), _shape(output)])] += 1

            hooks.append(mod.register_forward_hook(hook))
    trainer.step(1)
    for h in hooks:
        h.remove()
    params = {n: [list(_local(p).shape), str(p.dtype)] for part in trainer.parts for n, p in part.named_parameters()}
    nbytes = {"params": 0, "optimizer": 0}
    for part in trainer.parts:
        for p in part.parameters():
            nbytes["params"] += _local(p).nbytes
    for state in trainer.optimizer.state.values():
        nbytes["optimizer"] += sum(_local(v).nbytes for v in state.values() if isinstance(v, torch.Tensor))
    (out / f"{case}-rank-{rank}.json").write_text(
        json.dumps({"params": params, "calls": dict(sorted(calls.items())), "bytes": nbytes}, indent=0, sort_keys=True)
    )


def spec_of(fields: dict, **extra) -> RunSpec:
    return RunSpec.from_dict({**BASE, **fields, **extra})


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    if mode == "real":
        dist.init_process_group("gloo")
        (out / "real").mkdir(exist_ok=True)
        for case, (fields, _) in CASES.items():
            record(case, spec_of(fields), out / "real", dist.get_rank())
        dist.destroy_process_group()
        return
    import multiprocessing

    (out / "fake").mkdir(exist_ok=True)
    # one forked child a rank: a process joins one fake world (device meshes outlive a re-init)
    ctx = multiprocessing.get_context("fork")
    for case, (fields, ranks) in CASES.items():
        for r in ranks:
            child = ctx.Process(target=_fake_rank, args=(case, fields, r, out / "fake"))
            child.start()
            child.join()
            if child.exitcode:
                sys.exit(f"fake rank {r} of {case} failed (exit code {child.exitcode})")
    child = ctx.Process(target=_forced_fills, args=(out / "fake",))
    child.start()
    child.join()


def _forced_fills(out: Path) -> None:
    """The fill wrappers that older torch releases need, installed by force and checked here."""
    import torch.distributed._functional_collectives as funcol

    from scalestudy.harness.fake_comm import init_fake_process_group, install_fills

    init_fake_process_group(spec_of({}, comm="fake", emulate_rank=2))
    wrapped = install_fills({}, force=True)
    full, shard = torch.randn(16), torch.randn(4)
    rs, ag = torch.full((4,), float("nan")), torch.full((16,), float("nan"))
    dist.reduce_scatter_tensor(rs, full)
    dist.all_gather_into_tensor(ag, shard)
    frs = funcol.reduce_scatter_tensor(full, "sum", 0, dist.group.WORLD)
    fag = funcol.all_gather_tensor(shard, 0, dist.group.WORLD)
    (out / "fills.json").write_text(
        json.dumps(
            {
                "wrapped": wrapped,
                "checks": {
                    "reduce_scatter": torch.equal(rs, full[8:12]),
                    "all_gather": torch.equal(ag, shard.repeat(4)),
                    "functional_reduce_scatter": torch.equal(frs, full[8:12]),
                    "functional_all_gather": torch.equal(fag, shard.repeat(4)),
                },
            }
        )
    )


def _fake_rank(case: str, fields: dict, rank: int, out: Path) -> None:
    from scalestudy.harness.fake_comm import init_fake_process_group, start_record

    spec = spec_of(fields, comm="fake", emulate_rank=rank)
    init_fake_process_group(spec)
    start_record(spec, torch.device("cpu"))  # as a run does: fills and one-copy collectives installed
    record(case, spec, out, rank)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
