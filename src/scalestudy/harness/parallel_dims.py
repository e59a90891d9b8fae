"""The named DeviceMesh of a run, derived from its spec (torchtitan's ParallelDims)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from scalestudy.spec.run import MESH_DIMS, RunSpec


@dataclass
class ParallelDims:
    pp: int
    dp_replicate: int
    dp_shard: int
    tp: int
    world_size: int
    device_type: str

    @classmethod
    def from_spec(cls, spec: RunSpec, world_size: int) -> "ParallelDims":
        if world_size != spec.world_size:
            raise ValueError(
                f"the launcher started {world_size} processes but the spec needs "
                f"nodes*procs_per_node = {spec.world_size}"
            )
        return cls(spec.pp, spec.dp_replicate, spec.dp_shard, spec.tp, world_size, spec.device)

    @property
    def tp_enabled(self) -> bool:
        return self.tp > 1

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @cached_property
    def mesh(self) -> DeviceMesh:
        shape = tuple(getattr(self, d) for d in MESH_DIMS)
        return init_device_mesh(self.device_type, shape, mesh_dim_names=MESH_DIMS)

    @property
    def dp_mesh(self) -> DeviceMesh:
        """The FSDP mesh: 1-D (flat FSDP) or 2-D (HSDP: replicate x shard)."""
        if self.dp_replicate > 1:
            return self.mesh["dp_replicate", "dp_shard"]
        return self.mesh["dp_shard"]

    @property
    def tp_mesh(self) -> DeviceMesh:
        return self.mesh["tp"]

    @property
    def pp_mesh(self) -> DeviceMesh:
        return self.mesh["pp"]

    def dp_rank(self) -> int:
        return self.mesh["dp_replicate"].get_local_rank() * self.dp_shard + self.mesh["dp_shard"].get_local_rank()

    def pp_rank(self) -> int:
        return self.mesh["pp"].get_local_rank()

    def tp_rank(self) -> int:
        return self.mesh["tp"].get_local_rank()
