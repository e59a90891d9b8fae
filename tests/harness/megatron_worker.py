"""One rank of a multi-process CPU (gloo) check of the megatron-core backend's parts; started by
tests/harness/test_megatron_*.py as `python tests/harness/forked_ranks.py --nproc=N
tests/harness/megatron_worker.py CASE OUT_DIR` (the ranks forked from one process that imported torch
and megatron-core once: preload() below), or by hand under `torchrun --nproc_per_node N`.
Each rank writes OUT_DIR/rank-R.json: {"checks": {name: [max_abs_error, scale]}, ...}. The test
process asserts on them; this script asserts nothing about numbers itself."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from scalestudy.harness.llama import Transformer, init_weights  # noqa: E402
from scalestudy.harness.megatron_backend import mapping  # noqa: E402
from scalestudy.harness.megatron_backend import model as mmodel  # noqa: E402
from scalestudy.spec.run import RunSpec  # noqa: E402

CPU = torch.device("cpu")


def err(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    a, b = a.detach().float(), b.detach().float()
    assert a.shape == b.shape, (a.shape, b.shape)
    return [(a - b).abs().max().item(), b.abs().max().item()]


def megatron_init(spec: RunSpec):
    from megatron.core import parallel_state

    plan = mapping.plan(spec, allow_cpu=True)
    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(**plan.parallel)
    return plan


# ---- tensor-parallel layers -------------------------------------------------------------------


def case_tp_layers(rank: int, world: int) -> dict:
    """megatron ColumnParallelLinear -> RowParallelLinear (an MLP's two projections) against the
    torch backend's DTensor ColwiseParallel -> RowwiseParallel and against plain nn.Linear, with
    the same full weights, forward and backward. (Not with sequence parallelism: megatron-core's
    linear layers then gather into a CUDA buffer.)"""
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.transformer_config import TransformerConfig
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    d_in, d_hid, b, s = 16, 24, 2, 8
    gen = torch.Generator().manual_seed(0)
    w1, w2 = torch.randn(d_hid, d_in, generator=gen), torch.randn(d_in, d_hid, generator=gen)
    x_full = torch.randn(b, s, d_in, generator=gen)  # torch layout [b, s, h]
    dy_full = torch.randn(b, s, d_in, generator=gen)
    checks = {}

    # plain reference: nn.Linear with the full weights in one process
    ref = nn.Sequential(nn.Linear(d_in, d_hid, bias=False), nn.Linear(d_hid, d_in, bias=False))
    with torch.no_grad():
        ref[0].weight.copy_(w1)
        ref[1].weight.copy_(w2)
    xr = x_full.clone().requires_grad_(True)
    yr = ref(xr)
    yr.backward(dy_full)

    mesh = init_device_mesh("cpu", (world,))
    for sp in (False,):
        tag = "sp" if sp else "tp"
        spec = RunSpec(
            model="tiny",
            tp=world,
            procs_per_node=world,
            sequence_parallel=sp,
            seq_len=s,
            precision="fp32",
            device="cpu",
        )
        megatron_init(spec)
        r, n = parallel_state.get_tensor_model_parallel_rank(), world
        cfg = TransformerConfig(
            num_layers=1,
            hidden_size=d_in,
            num_attention_heads=n,
            tensor_model_parallel_size=n,
            sequence_parallel=sp,
            use_cpu_initialization=True,
            perform_initialization=False,
            gradient_accumulation_fusion=False,
            add_bias_linear=False,
        )
        col = ColumnParallelLinear(d_in, d_hid, config=cfg, init_method=nn.init.zeros_, bias=False, gather_output=False)
        row = RowParallelLinear(
            d_hid, d_in, config=cfg, init_method=nn.init.zeros_, bias=False, input_is_parallel=True, skip_bias_add=False
        )
        h = d_hid // n
        with torch.no_grad():
            col.weight.copy_(w1[r * h : (r + 1) * h])
            row.weight.copy_(w2[:, r * h : (r + 1) * h])
        # megatron's layout [s, b, h]; with sequence parallelism each rank holds s / tp positions
        xm = x_full.transpose(0, 1).contiguous()
        dym = dy_full.transpose(0, 1).contiguous()
        if sp:
            q = s // n
            xm, dym = xm[r * q : (r + 1) * q].contiguous(), dym[r * q : (r + 1) * q].contiguous()
        xm.requires_grad_(True)
        hm, _ = col(xm)
        ym, _ = row(hm)
        ym.backward(dym)

        # the torch backend's DTensor layers (as harness/parallelize.apply_tp sets them up)
        tm = nn.Sequential(nn.Linear(d_in, d_hid, bias=False), nn.Linear(d_hid, d_in, bias=False))
        with torch.no_grad():
            tm[0].weight.copy_(w1)
            tm[1].weight.copy_(w2)
        if sp:
            plan = {"0": ColwiseParallel(input_layouts=Shard(1)), "1": RowwiseParallel(output_layouts=Shard(1))}
            q = s // n
            xt, dyt = x_full[:, r * q : (r + 1) * q].clone(), dy_full[:, r * q : (r + 1) * q]
        else:
            plan = {"0": ColwiseParallel(), "1": RowwiseParallel()}
            xt, dyt = x_full.clone(), dy_full
        parallelize_module(tm, mesh, plan)
        xt.requires_grad_(True)
        yt = tm(xt)
        yt.backward(dyt)

        ym_bsh = ym.transpose(0, 1)
        checks[f"{tag}_out_vs_dtensor"] = err(ym_bsh, yt)
        checks[f"{tag}_dx_vs_dtensor"] = err(xm.grad.transpose(0, 1), xt.grad)
        checks[f"{tag}_dw_col_vs_dtensor"] = err(col.weight.grad, tm[0].weight.grad.to_local())
        checks[f"{tag}_dw_row_vs_dtensor"] = err(row.weight.grad, tm[1].weight.grad.to_local())
        sl = slice(r * (s // n), (r + 1) * (s // n)) if sp else slice(None)
        checks[f"{tag}_out_vs_linear"] = err(ym_bsh, yr[:, sl])
        checks[f"{tag}_dx_vs_linear"] = err(xm.grad.transpose(0, 1), xr.grad[:, sl])
        checks[f"{tag}_dw_col_vs_linear"] = err(col.weight.grad, ref[0].weight.grad[r * h : (r + 1) * h])
        checks[f"{tag}_dw_row_vs_linear"] = err(row.weight.grad, ref[1].weight.grad[:, r * h : (r + 1) * h])
    return {"checks": checks}


# ---- process groups ---------------------------------------------------------------------------

LAYOUTS_4 = {
    "fsdp-tp": dict(tp=2),
    "tp-pp": dict(tp=2, pp=2),
    "fsdp-pp": dict(pp=2),
    "hsdp": dict(nodes=2, dp_replicate=2),
    "ddp-tp": dict(nodes=2, dp_replicate=2, tp=2),
    "pp-interleaved": dict(pp=2, pp_schedule="interleaved_1f1b", pp_stages_per_rank=2, tp=2),
}


def case_parallel_state(rank: int, world: int) -> dict:
    """megatron-core's groups from mapping.plan against the torch backend's DeviceMesh groups."""
    from megatron.core import parallel_state as ps

    from scalestudy.harness.parallel_dims import ParallelDims

    def ranks(group) -> list[int]:
        return sorted(dist.get_process_group_ranks(group))

    out = {}
    for name, kw in LAYOUTS_4.items():
        kw = dict(kw)
        nodes = kw.pop("nodes", 1)
        spec = RunSpec(model="tiny", nodes=nodes, procs_per_node=world // nodes, device="cpu", precision="fp32", **kw)
        plan = megatron_init(spec)
        dims = ParallelDims.from_spec(spec, world)
        mesh = dims.mesh
        got = {
            "tp": ranks(ps.get_tensor_model_parallel_group()),
            "pp": ranks(ps.get_pipeline_model_parallel_group()),
            "dp": ranks(ps.get_data_parallel_group()),
            "dp_rank": ps.get_data_parallel_rank(),
            "tp_rank": ps.get_tensor_model_parallel_rank(),
            "pp_rank": ps.get_pipeline_model_parallel_rank(),
        }
        want = {
            "tp": ranks(mesh["tp"].get_group()),
            "pp": ranks(mesh["pp"].get_group()),
            "dp": sorted(_dp_block(mesh)),
            "dp_rank": dims.dp_rank(),
            "tp_rank": dims.tp_rank(),
            "pp_rank": dims.pp_rank(),
        }
        if spec.dp_replicate > 1 and spec.dp_shard > 1:
            intra = ps.get_data_parallel_group(with_context_parallel=True, partial_data_parallel=True)
            got["intra_partial_dp"] = ranks(intra)
            want["intra_partial_dp"] = ranks(mesh["dp_shard"].get_group())
            got["inter_partial_dp"] = ranks(ps.get_inter_distributed_optimizer_instance_group())
            want["inter_partial_dp"] = ranks(mesh["dp_replicate"].get_group())
        out[name] = {"got": got, "want": want, "parallel": {k: v for k, v in plan.parallel.items()}}
    return {"layouts": out}


def _dp_block(mesh) -> set[int]:
    """Every rank sharing this rank's pp and tp coordinates: the whole data-parallel group."""
    t = mesh.mesh  # (pp, dp_replicate, dp_shard, tp) tensor of global ranks
    me = dist.get_rank()
    idx = (t == me).nonzero()[0].tolist()
    return set(t[idx[0], :, :, idx[3]].flatten().tolist())


# ---- GPTModel pieces against the torch backend's Transformer ----------------------------------


def _gpt_pieces_forward(gpt, tokens: torch.Tensor) -> torch.Tensor:
    """Embedding, decoder and output layer of a GPTModel chunk on CPU: GPTModel.forward itself
    moves its rotary table to CUDA, so the test computes the same table (the rotate-half form,
    cat(freqs, freqs)) on CPU and calls the pieces."""
    b, s = tokens.shape
    pos = torch.arange(s).unsqueeze(0).expand(b, -1)
    h = gpt.embedding(input_ids=tokens, position_ids=pos)
    freqs = gpt.rotary_pos_emb.get_freqs_non_repeated(s)
    emb = torch.cat((freqs, freqs), dim=-1)[:, None, None, :]
    h = gpt.decoder(hidden_states=h, attention_mask=None, rotary_pos_emb=emb)
    logits, _ = gpt.output_layer(h)
    return logits  # [s, b, vocab / tp]


def case_decoder(rank: int, world: int, tp: int | None = None) -> dict:
    """A GPTModel (tiny shape: GQA, SwiGLU, RoPE) with weights copied from the torch backend's
    Transformer by name: logits, loss and every parameter's gradient (the torch gradient mapped
    by the same name map) agree, at TP = `tp` (default: the world size; the rest data-parallel), float32."""
    from megatron.core import parallel_state as ps
    from megatron.core import tensor_parallel

    s, b = 16, 2
    tp = tp or world
    spec = RunSpec(model="tiny", tp=tp, procs_per_node=world, seq_len=s, precision="fp32", device="cpu")
    plan = megatron_init(spec)
    cfg = spec.model_config()
    tp_rank = ps.get_tensor_model_parallel_rank()

    ref = Transformer(cfg, s)
    init_weights(ref, cfg, seed=3, device=CPU)
    config = mmodel.transformer_config(plan)
    (gpt,) = mmodel.build_chunks(plan, config)
    mmodel.load_from_torch(gpt, cfg, mmodel.state_dict_fetch(ref.state_dict()), tp_rank, tp)

    gen = torch.Generator().manual_seed(1)
    seqs = torch.randint(0, cfg.vocab_size, (b, s + 1), generator=gen)
    tokens, labels = seqs[:, :-1], seqs[:, 1:]

    logits_ref = ref(tokens)
    loss_ref = F.cross_entropy(logits_ref.flatten(0, 1), labels.flatten(0, 1))
    loss_ref.backward()

    logits = _gpt_pieces_forward(gpt, tokens)
    # (megatron's cross entropy works in place on the logits it is given: give it a copy)
    per_token = tensor_parallel.vocab_parallel_cross_entropy(
        logits.float().clone(), labels.transpose(0, 1).contiguous()
    )
    loss = per_token.mean()
    loss.backward()

    v = cfg.vocab_size // tp
    checks = {
        "logits": err(logits.transpose(0, 1), logits_ref[..., tp_rank * v : (tp_rank + 1) * v]),
        "loss": err(loss, loss_ref),
    }
    grads = {n: p.grad for n, p in ref.named_parameters()}
    for name, p in gpt.named_parameters():
        m = mmodel._LAYER.match(name)
        layer = mmodel.global_layer_index(gpt, int(m.group(1))) if m else None
        want, _ = mmodel.megatron_value(name, layer, cfg, grads.__getitem__, tp_rank, tp)
        checks[f"grad:{name}"] = err(p.grad, want)
    return {"checks": checks}


def case_pp_chunks(rank: int, world: int) -> dict:
    """Pipeline (and interleaved) chunks hold the layers the torch backend's stages hold, with
    the weights of those layers."""
    from megatron.core import parallel_state as ps

    from scalestudy.harness.pipeline import stage_ids

    out = {}
    for name, kw in {
        "1f1b": dict(pp=world),
        "interleaved": dict(pp=world, pp_schedule="interleaved_1f1b", pp_stages_per_rank=2),
    }.items():
        spec = RunSpec(model="tiny", procs_per_node=world, seq_len=16, precision="fp32", device="cpu", **kw)
        plan = megatron_init(spec)
        cfg = spec.model_config()
        chunks = mmodel.build_chunks(plan, mmodel.transformer_config(plan))
        ref = Transformer(cfg, 16)
        init_weights(ref, cfg, seed=0, device=CPU)
        fetch = mmodel.state_dict_fetch(ref.state_dict())
        n_stages = spec.pp * spec.pp_stages_per_rank
        per = cfg.n_layers // n_stages
        sids = stage_ids(ps.get_pipeline_model_parallel_rank(), spec)
        want_layers = [list(range(sid * per, (sid + 1) * per)) for sid in sids]
        got_layers = [[mmodel.global_layer_index(c, i) for i in range(len(c.decoder.layers))] for c in chunks]
        for c in chunks:
            mmodel.load_from_torch(c, cfg, fetch)
        worst = 0.0
        for c in chunks:
            for pname, p in c.named_parameters():
                m = mmodel._LAYER.match(pname)
                layer = mmodel.global_layer_index(c, int(m.group(1))) if m else None
                want, _ = mmodel.megatron_value(pname, layer, cfg, fetch)
                worst = max(worst, (p - want).abs().max().item())
        out[name] = {
            "got_layers": got_layers,
            "want_layers": want_layers,
            "pre_post": [[c.pre_process, c.post_process] for c in chunks],
            "max_weight_error": worst,
        }
    return {"chunks": out}


def preload() -> None:
    """What the cases import, imported once before tests/harness/forked_ranks.py forks the ranks."""
    import megatron.core.models.gpt  # noqa: F401
    import megatron.core.optimizer  # noqa: F401
    import megatron.core.parallel_state  # noqa: F401
    import megatron.core.tensor_parallel  # noqa: F401
    import megatron.core.transformer.attention  # noqa: F401
    import megatron.core.transformer.mlp  # noqa: F401
    import megatron.core.transformer.transformer_block  # noqa: F401
    import megatron.core.transformer.transformer_config  # noqa: F401
    import megatron.core.transformer.transformer_layer  # noqa: F401
    import torch.distributed.device_mesh  # noqa: F401
    import torch.distributed.tensor.parallel  # noqa: F401


CASES = {
    "tp_layers": case_tp_layers,
    "parallel_state": case_parallel_state,
    "decoder": case_decoder,
    "decoder_tp1": lambda rank, world: case_decoder(rank, world, tp=1),
    "pp_chunks": case_pp_chunks,
}


def main() -> None:
    """megatron_worker.py CASE[,CASE...] OUT: each case in turn, its results in OUT/CASE/rank-R.json."""
    cases, out_dir = sys.argv[1].split(","), Path(sys.argv[2])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for case in cases:
        torch.manual_seed(0)
        result = CASES[case](rank, world)
        result.update(rank=rank, world=world)
        (out_dir / case).mkdir(parents=True, exist_ok=True)
        (out_dir / case / f"rank-{rank}.json").write_text(json.dumps(result))
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
