"""Fake communication: one process runs the share of one rank of any layout (spec `comm: fake`).

The process joins torch's fake process group (torch.testing._internal.distributed.fake_pg, as
torchtitan's `comm.mode = "fake_backend"` does for its dry runs) as rank `emulate_rank` of a
world of `nodes * procs_per_node`: the device mesh, FSDP2 and DTensor shard exactly as on that
rank, and every collective returns at once without moving data.

Outputs look like real data. A GPU's power and clocks depend on the values it multiplies, so a
collective's output must hold neither zeros nor uninitialised memory. All-reduce and broadcast
are in place: their output is the local input, real data. For all-gather and reduce-scatter,
torch's fake backend (2.13) itself writes the local shard into every chunk of an all-gather's
output and the rank's slice of the input into a reduce-scatter's output; older releases leave
some outputs unwritten (2.11 the reduce-scatter's). `probe_fills` checks this once at start on
the run's device, and where the backend leaves an output unwritten `install_fills` wraps the
Python entry points (torch.distributed's for FSDP2, the functional collectives' for DTensor) to
fill it the same way after the call: one device copy of the output's size a call. The probe's
answers and the wrappers installed go into the raw log (`fake_comm` record).

The backend writes an all-gather's output one chunk at a time (FakeProcessGroup::_allgather_base,
world-size copies a call; on a GPU, kernel launches) and, where it writes a reduce-scatter's,
cuts the input into world-size views first: host work that grows with the emulated world and
that no real backend does (docs/rank-shares.md). `install_one_copy_collectives` replaces
torch.distributed's all-gather and reduce-scatter (what FSDP2 calls; fake groups only) by one
copy a call, whatever the world size; the functional collectives (DTensor's, over TP groups of a
few ranks) stay the backend's.

Pipeline stages run without the pipeline schedule (no peer sends activations): `FakeStage`
runs this rank's stage on the microbatches in the order of the GPipe or 1F1B schedule, with
random activations of the real shape (and dtype) as the input of a non-first stage and random
gradients as the output gradient of a non-last stage, made once and copied per microbatch as a
receive would.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Callable

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.distributed.fsdp import FSDPModule

from scalestudy.harness import faults
from scalestudy.spec.rank_share import LABEL
from scalestudy.spec.run import RunSpec

_DIST_ALL_GATHER = ("all_gather_into_tensor", "all_gather_single")
_DIST_REDUCE_SCATTER = ("reduce_scatter_tensor", "reduce_scatter_single")
_FUNCOL_ALL_GATHER = ("all_gather_tensor", "all_gather_single")
_FUNCOL_REDUCE_SCATTER = ("reduce_scatter_tensor", "reduce_scatter_single")


def init_fake_process_group(spec: RunSpec) -> None:
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    dist.init_process_group("fake", store=FakeStore(), rank=spec.emulate_rank, world_size=spec.world_size)


def _sentinel(shape, device) -> torch.Tensor:
    return torch.full(shape, float("nan"), device=device)


def probe_fills(device: torch.device) -> dict:
    """Whether the fake backend writes the outputs of all-gather and reduce-scatter itself, through
    torch.distributed and through the functional collectives (what DTensor calls)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    shard = torch.randn(4, device=device)
    full = torch.randn(world * 4, device=device)
    out = {}
    ag = _sentinel((world * 4,), device)
    dist.all_gather_into_tensor(ag, shard)
    out["all_gather"] = bool(torch.equal(ag.view(world, 4)[rank], shard) and not ag.isnan().any())
    rs = _sentinel((4,), device)
    dist.reduce_scatter_tensor(rs, full)
    out["reduce_scatter"] = bool(torch.equal(rs, full.view(world, 4)[rank]))
    group = dist.group.WORLD
    fag = funcol.wait_tensor(funcol.all_gather_tensor(shard, 0, group))
    out["functional_all_gather"] = bool(not fag.isnan().any() and torch.equal(fag.view(world, 4)[rank], shard))
    frs = funcol.wait_tensor(funcol.reduce_scatter_tensor(full, "sum", 0, group))
    out["functional_reduce_scatter"] = bool(torch.equal(frs, full.view(world, 4)[rank]))
    return out


def _fill_all_gather(output: torch.Tensor, shard: torch.Tensor, world: int) -> None:
    local = shard.reshape(1, -1).clone()  # the shard may be a view into the output (FSDP2 gathers in place)
    output.view(world, -1).copy_(local.expand(world, -1))


def _fill_reduce_scatter(output: torch.Tensor, full: torch.Tensor, world: int, rank: int) -> None:
    output.view(-1).copy_(full.reshape(world, -1)[rank])


def _wrap_dist(fn: Callable, kind: str) -> Callable:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        work = fn(*args, **kwargs)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        output, inp = list(bound.arguments.values())[:2]
        group = bound.arguments.get("group")
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        if kind == "all_gather":
            _fill_all_gather(output, inp, world)
        else:
            _fill_reduce_scatter(output, inp, world, rank)
        return work

    return wrapper


def _wrap_funcol(fn: Callable, kind: str) -> Callable:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = funcol.wait_tensor(fn(*args, **kwargs))
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        inp = next(iter(a.values()))
        pg = funcol._resolve_group(a["group"]) if hasattr(funcol, "_resolve_group") else dist.group.WORLD
        world, rank = dist.get_world_size(pg), dist.get_rank(pg)
        dim = a.get("gather_dim", a.get("scatter_dim", 0))
        with torch.no_grad():
            if kind == "all_gather":
                out.copy_(torch.cat([inp] * world, dim=dim))
            else:
                out.copy_(inp.chunk(world, dim=dim)[rank])
        return out

    return wrapper


def _completed_work() -> dist.Work:
    fut = torch.futures.Future()
    fut.set_result(None)
    return torch._C._distributed_c10d._create_work_from_future(fut)


def _one_copy(fn: Callable, kind: str) -> Callable:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        output, inp = list(bound.arguments.values())[:2]
        group = bound.arguments.get("group") or dist.group.WORLD
        if dist.get_backend(group) != "fake":
            return fn(*args, **kwargs)
        with torch.no_grad():
            if kind == "all_gather":
                _fill_all_gather(output, inp, dist.get_world_size(group))
            else:
                _fill_reduce_scatter(output, inp, dist.get_world_size(group), dist.get_rank(group))
        return _completed_work() if bound.arguments.get("async_op") else None

    return wrapper


def install_one_copy_collectives() -> list[str]:
    """Replace torch.distributed's all-gather and reduce-scatter into one tensor (what FSDP2 calls),
    for groups of the fake backend, by one copy a call that fills the output by the fill rule;
    returns the names replaced.

    The backend writes an all-gather's output one chunk at a time and cuts a reduce-scatter's input
    into world-size views (FakeProcessGroup::_allgather_base, _reduce_scatter_base): world-size
    copies (on a GPU, kernel launches) or views a call, host work that grows with the emulated
    world and that no real backend does (NCCL launches one kernel)."""
    return [
        *_replace(dist, _DIST_ALL_GATHER, "all_gather", _one_copy, "_scalestudy_one_copy"),
        *_replace(dist, _DIST_REDUCE_SCATTER, "reduce_scatter", _one_copy, "_scalestudy_one_copy"),
    ]


def _replace(module, names: tuple[str, ...], kind: str, wrap: Callable, marker: str) -> list[str]:
    """Put wrap(fn, kind) in place of each of module's `names` not yet wrapped (marked `marker`)."""
    done = []
    for name in names:
        fn = getattr(module, name, None)
        if fn is None or getattr(fn, marker, False):
            continue
        w = wrap(fn, kind)
        setattr(w, marker, True)
        setattr(module, name, w)
        done.append(f"{module.__name__}.{name}")
    return done


def install_fills(fills: dict, *, force: bool = False) -> list[str]:
    """Wrap the entry points whose outputs the backend leaves unwritten (all of them with force);
    returns the names wrapped."""
    wrapped = []
    plan = [
        (dist, _DIST_ALL_GATHER, "all_gather", "all_gather", _wrap_dist),
        (dist, _DIST_REDUCE_SCATTER, "reduce_scatter", "reduce_scatter", _wrap_dist),
        (funcol, _FUNCOL_ALL_GATHER, "functional_all_gather", "all_gather", _wrap_funcol),
        (funcol, _FUNCOL_REDUCE_SCATTER, "functional_reduce_scatter", "reduce_scatter", _wrap_funcol),
    ]
    for module, names, probe_key, kind, wrap in plan:
        if force or not fills.get(probe_key, False):
            wrapped += _replace(module, names, kind, wrap, "_scalestudy_fill")
    return wrapped


def cap_device_memory(spec: RunSpec, device: torch.device) -> dict | None:
    """Make the caching allocator refuse memory beyond the spec's cap, as a GPU of that size would."""
    if not spec.device_memory_cap_gib:
        return None
    total = torch.cuda.get_device_properties(device).total_memory
    cap = int(spec.device_memory_cap_gib * 2**30)
    if cap > total:
        raise faults.InvalidConfig(
            f"device_memory_cap_gib {spec.device_memory_cap_gib} exceeds this device's "
            f"{total / 2**30:.1f} GiB ({torch.cuda.get_device_name(device)}): a GPU of that "
            "size cannot be emulated on it"
        )
    torch.cuda.set_per_process_memory_fraction(cap / total, device)
    return {
        "cap_gib": spec.device_memory_cap_gib,
        "cap_bytes": cap,
        "device_total_bytes": total,
        "fraction": cap / total,
        "how": "torch.cuda.set_per_process_memory_fraction",
    }


def start_record(spec: RunSpec, device: torch.device) -> dict:
    """Set up a fake-communication run in this process (after init_fake_process_group): probe the
    collectives' outputs and fill those left unwritten; returns run.json's `rank_share` record."""
    with warnings.catch_warnings():  # torch deprecates the names that older releases offer alone
        warnings.simplefilter("ignore", FutureWarning)
        fills = probe_fills(device)
    wrapped = install_fills(fills)
    one_copy = install_one_copy_collectives()
    return {
        "label": LABEL,
        "world_size_emulated": spec.world_size,
        "rank_emulated": spec.emulate_rank,
        "backend": "torch fake process group (torch.testing._internal.distributed.fake_pg)",
        "torch": torch.__version__,
        "backend_fills_outputs": fills,
        "fill_wrappers": wrapped,
        "one_copy_collectives": one_copy,
        "fill_rule": "all-gather: the local shard in every chunk; reduce-scatter: this rank's slice of the "
        "input; all-reduce/broadcast: in place (the local input)",
    }


class FakeStage:
    """This rank's pipeline stage run through one step's microbatches in its schedule's order
    (GPipe: all forwards, then all backwards; 1F1B: pp - stage warm-up forwards, then one backward
    and one forward in turn, then the rest of the backwards). Same interface as a schedule's step."""

    def __init__(self, part: nn.Module, stage: int, spec: RunSpec, device: torch.device, loss_fn: Callable):
        self.part, self.stage, self.spec, self.device, self.loss_fn = part, stage, spec, device, loss_fn
        self.n_stages = spec.pp
        self.first, self.last = stage == 0, stage == spec.pp - 1
        cfg = spec.model_config()
        seq = spec.seq_len // spec.tp if spec.sequence_parallel else spec.seq_len
        dtype = torch.bfloat16 if spec.precision == "bf16" else torch.float32
        gen = torch.Generator(device=device)
        gen.manual_seed(spec.seed + 7919 * stage)
        shape = (spec.micro_batch, seq, cfg.dim)
        self._input = None if self.first else torch.randn(shape, generator=gen, device=device, dtype=dtype)
        self._out_grad = None if self.last else torch.randn(shape, generator=gen, device=device, dtype=dtype)

    def order(self) -> list[tuple[str, int]]:
        m = self.spec.pp_microbatches
        if self.spec.pp_schedule == "gpipe":
            return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
        warm = min(m, self.n_stages - self.stage)
        ops = [("F", i) for i in range(warm)]
        f, b = warm, 0
        while b < m:
            ops.append(("B", b))
            b += 1
            if f < m:
                ops.append(("F", f))
                f += 1
        return ops

    def _set_sync(self, last: bool) -> None:
        if isinstance(self.part, FSDPModule):  # gradients reduced once a step, as the schedules do
            self.part.set_is_last_backward(last)
            self.part.set_reshard_after_backward(last)
            self.part.set_requires_gradient_sync(last)

    def step(self, *args, target=None, losses: list | None = None) -> None:
        m, mb = self.spec.pp_microbatches, self.spec.micro_batch
        xs = args[0].split(mb) if self.first else None
        ys = target.split(mb) if self.last else None
        live: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        for op, i in self.order():
            if op == "F":
                x = xs[i] if self.first else self._input.clone().requires_grad_(True)
                out = self.part(x)
                if self.last:
                    loss = self.loss_fn(out, ys[i])
                    if losses is not None:
                        losses.append(loss.detach())
                    live[i] = (loss, None)
                else:
                    live[i] = (out, self._out_grad)
            else:
                out, grad = live.pop(i)
                self._set_sync(i == m - 1)
                out.backward(grad)
        self._set_sync(True)
