# The two commands of the README. Each creates .venv on first use.
#   make figures   the whole workflow on the embedded default study (CPU, gloo, tiny Llama)
#   make test      the whole test suite
PYTHON ?= python3
VENV ?= .venv
# The torch build installed before the package. Here: the pinned CPU wheel. On a GPU cluster
# pass your CUDA build, e.g. make TORCH_SPEC="torch==2.13.0 --index-url <your CUDA wheel index>",
# or install torch yourself first (conda: see environment.yml).
TORCH_SPEC ?= torch==2.13.0
# Every other package at the exact version tested (pip freeze of the tested venv); LOCK= to use
# only pyproject.toml's version ranges.
LOCK ?= requirements-lock.txt
CORES ?= 2
STUDY ?= smoke
PYTEST_ARGS ?=
# pytest-xdist workers of `make test` (0: one process); pyproject.toml's pytest options keep each
# test module on one worker
TEST_WORKERS ?= 2

BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: figures smoke test test-slurm venv lock clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet $(if $(LOCK),-c $(LOCK)) -e ".[test]"
	touch $@

# rewrite the lock from this venv (after changing a dependency; then make test)
lock: venv
	{ sed -n '/^#/p' $(LOCK); $(BIN)/python -m pip freeze --exclude-editable | grep -v '^torch==\|^scalestudy'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)

figures: venv
	snakemake --cores $(CORES) --config study=$(STUDY)

# one 4-process FSDP training run of the tiny Llama on gloo
smoke: venv
	OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node 4 -m scalestudy train \
		--procs-per-node 4 --precision fp32 --warmup-iters 2 --measured-iters 5 --out-root runs

test: venv
	OMP_NUM_THREADS=1 python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# the SLURM tests alone; the cluster tests need root and slurm+munge (ci/install-slurm.sh)
test-slurm: venv
	OMP_NUM_THREADS=1 python -m pytest tests/launch/test_slurm_launch.py tests/launch/test_slurm_cluster.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .snakemake runs
