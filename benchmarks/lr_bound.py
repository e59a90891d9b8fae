"""The largest learning rate the harness trains with (scalestudy.spec.run.LR_MAX), measured.

Trains the smoke study's tiny Llama (4 layers, width 64, seq 128, fp32, one process on CPU, seed 0,
the harness's Trainer and synthetic tokens) for a few steps at each learning rate and prints the
global loss of every step, beside ln(vocab) (a uniform prediction) and the sane band of
scalestudy.harness.faults.check_step (at most LOSS_BAND_FACTOR x ln(vocab)):

    python benchmarks/lr_bound.py --optimizer adamw --steps 7 3e-4 0.01 0.1 0.5 1 10
    python benchmarks/lr_bound.py --optimizer sgd --steps 7 1 10 30 100

A learning rate whose loss leaves the band is one the harness cannot train with; LR_MAX is the
largest one measured that stays in it. One process, a few seconds a rate on a 2-core host.
"""

from __future__ import annotations

import argparse
import math
import os


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lrs", nargs="+", type=float)
    ap.add_argument("--optimizer", default="adamw", choices=("adamw", "sgd"))
    ap.add_argument("--steps", type=int, default=7, help="the smoke study's 2 warm-up + 5 measured steps")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    import torch
    import torch.distributed as dist

    from scalestudy.harness import faults
    from scalestudy.harness.parallel_dims import ParallelDims
    from scalestudy.harness.train import Trainer
    from scalestudy.spec.run import RunSpec

    dist.init_process_group("gloo")
    for lr in args.lrs:
        # RunSpec refuses a learning rate above LR_MAX: build the bounded one, then set the rate asked for
        spec = RunSpec(
            model="tiny",
            n_layers=4,
            device="cpu",
            precision="fp32",
            seq_len=128,
            micro_batch=1,
            warmup_iters=2,
            measured_iters=5,
            seed=0,
            optimizer=args.optimizer,
        )
        trainer = Trainer(spec, ParallelDims.from_spec(spec, 1), torch.device("cpu"))
        for group in trainer.optimizer.param_groups:
            group["lr"] = lr
        vocab = trainer.cfg.vocab_size
        lo, hi = faults.loss_band(vocab)
        losses = [trainer.global_loss(trainer.step(s)) for s in range(args.steps)]
        out = next((s for s, v in enumerate(losses) if not (math.isfinite(v) and lo <= v <= hi)), None)
        print(
            f"{args.optimizer} lr={lr:g} ln(vocab {vocab})={math.log(vocab):.3f} band<={hi:.2f} "
            f"{'leaves the band at step ' + str(out) if out is not None else 'in the band'}: "
            + " ".join(f"{v:.3f}" for v in losses),
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
