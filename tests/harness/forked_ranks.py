"""Start the ranks of a test worker script the way the package starts a one-host CPU run's
(scalestudy.launch.local_workers.run_workers): this process imports the script once - torch and
whatever it imports at the top, and what its preload() imports - then forks one process a rank
with the environment torchrun would give it (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, ...), each running the script's main() on the arguments, and exits with the first
non-zero exit code of a rank.

    python tests/harness/forked_ranks.py --nproc=N tests/harness/WORKER.py ARGS...

does what `torchrun --standalone --nproc_per_node N tests/harness/WORKER.py ARGS...` does for the
tests that check what the ranks compute, without torchrun's agent and a fresh import of torch
(and of megatron-core, about 3 CPU-seconds more) in every rank. How torchrun, local_workers and a
warm server start a run's ranks is tested by the fault, launch and SLURM tests."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or not argv[0].startswith("--nproc="):
        sys.exit("usage: forked_ranks.py --nproc=N WORKER.py ARGS...")
    nproc, script, args = int(argv[0].removeprefix("--nproc=")), Path(argv[1]).resolve(), argv[2:]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(script.parent))
    spec = importlib.util.spec_from_file_location(script.stem, script)
    assert spec is not None and spec.loader is not None, script
    worker = importlib.util.module_from_spec(spec)
    sys.modules[script.stem] = worker
    spec.loader.exec_module(worker)
    if hasattr(worker, "preload"):
        worker.preload()

    from scalestudy.launch.local_workers import run_workers

    def rank(rank_args: list[str]) -> int:
        sys.argv = [str(script), *rank_args]
        worker.main()
        return 0

    return run_workers(nproc, args, rank)


if __name__ == "__main__":
    sys.exit(main())
