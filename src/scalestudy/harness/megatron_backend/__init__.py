"""The megatron-core backend: the package's Llama configs built as megatron-core `GPTModel`, its
parallel groups, its DDP or distributed optimizer and its pipeline schedules.

- `mapping`: pure; RunSpec -> megatron-core arguments, and the refusal of layouts that
  megatron-core cannot express (imports neither megatron-core nor process groups).
- `model`: the GPTModel with Llama settings, and weights by name from the torch backend's model.
- `trainer`: a Trainer-compatible object (harness.backend.StepBackend) used when `spec.backend` is megatron.

megatron-core is the optional extra `megatron` (`pip install scalestudy[megatron]`).
"""

from __future__ import annotations

import importlib.metadata

from scalestudy.harness.faults import InvalidConfig

DISTRIBUTION = "megatron-core"


def megatron_core_version() -> str | None:
    """The installed megatron-core's version, or None."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def require_megatron_core() -> str:
    """The installed version; an InvalidConfig (run status `invalid_config`) if there is none."""
    version = megatron_core_version()
    if version is None:
        raise InvalidConfig("backend 'megatron' needs megatron-core: pip install 'scalestudy[megatron]'")
    return version
