"""Stand-in of python/sglang/srt/distributed/parallel_state.py at
0005973a84f7a02787e270b6be5970d3022d07fe (adapted upstream from vLLM's):
GroupCoordinator (rank, ranks, world_size, local_rank, rank_in_group,
device_group of the job's backend, cpu_group: gloo, "to allow direct
coordination between processes through the CPU"), the world group
(init_distributed_environment, get_world_group), the tensor-parallel group
(initialize_model_parallel: TP groups of contiguous ranks, PP groups
strided; get_tp_group and its backward-compatible alias
get_tensor_model_parallel_group, get_tensor_model_parallel_rank/
_world_size), model_parallel_is_initialized (_TP and _PP set) and the
destroy functions. Left out: the device communicators, message-queue
broadcaster, the attention/MoE/DCP groups, PD-multiplexing's prefill group
(get_tp_group's other answer), mooncake. Here the device group is gloo too
(no GPU); init_distributed_environment's timeout is in seconds, as
upstream's."""
from datetime import timedelta
from typing import List, Optional

import torch
import torch.distributed as tdist


class GroupCoordinator:
    """A group of processes: one device group and one gloo cpu group of
    the same ranks (every rank creates every group: new_group is
    collective)."""

    def __init__(self, group_ranks: List[List[int]], local_rank: int,
                 torch_distributed_backend, group_name: Optional[str] = None):
        self.unique_name = group_name or "anonymous"
        self.rank = tdist.get_rank()
        self.local_rank = local_rank
        self.device_group = self.cpu_group = None
        for ranks in group_ranks:
            device_group = tdist.new_group(ranks, backend=torch_distributed_backend)
            cpu_group = tdist.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
                self.device_group, self.cpu_group = device_group, cpu_group
        self.device = torch.device("cpu")

    def destroy(self):
        for g in (self.device_group, self.cpu_group):
            if g is not None:
                tdist.destroy_process_group(g)
        self.device_group = self.cpu_group = None


_WORLD: Optional[GroupCoordinator] = None
_TP: Optional[GroupCoordinator] = None
_PP: Optional[GroupCoordinator] = None


def _set_up(group, what):
    """The group, asserted set up, with upstream's message."""
    assert group is not None, f"{what} group is not initialized"
    return group


def get_world_group() -> GroupCoordinator:
    return _set_up(_WORLD, "world")


def get_tp_group() -> GroupCoordinator:
    return _set_up(_TP, "tensor model parallel")


# kept for backward compatibility (upstream's own words)
get_tensor_model_parallel_group = get_tp_group


def get_pp_group() -> GroupCoordinator:
    return _set_up(_PP, "pipeline model parallel")


def init_distributed_environment(world_size=-1, rank=-1, distributed_init_method="env://",
                                 local_rank=-1, backend="nccl", timeout=None):
    global _WORLD
    if not tdist.is_initialized():
        kw = {"timeout": timedelta(seconds=timeout)} if timeout is not None else {}
        tdist.init_process_group(backend=backend, init_method=distributed_init_method,
                                 world_size=world_size, rank=rank, **kw)
    if local_rank == -1:
        local_rank = rank
    if _WORLD is None:
        _WORLD = GroupCoordinator([list(range(tdist.get_world_size()))], local_rank, backend,
                                  group_name="world")


def initialize_model_parallel(tensor_model_parallel_size=1, expert_model_parallel_size=1,
                              pipeline_model_parallel_size=1, backend=None):
    global _TP, _PP
    assert tdist.is_initialized()
    backend = backend or tdist.get_backend(get_world_group().device_group)
    world_size = tdist.get_world_size()
    if world_size != tensor_model_parallel_size * pipeline_model_parallel_size:
        raise RuntimeError(f"world_size ({world_size}) is not equal to "
                           f"tensor_model_parallel_size ({tensor_model_parallel_size}) x "
                           f"pipeline_model_parallel_size ({pipeline_model_parallel_size})")
    tp = tensor_model_parallel_size
    assert _TP is None, "tensor model parallel group is already initialized"
    _TP = GroupCoordinator([list(range(i * tp, (i + 1) * tp)) for i in range(world_size // tp)],
                           get_world_group().local_rank, backend, group_name="tp")
    n_pp = world_size // pipeline_model_parallel_size
    assert _PP is None, "pipeline model parallel group is already initialized"
    _PP = GroupCoordinator([list(range(i, world_size, n_pp)) for i in range(n_pp)],
                           get_world_group().local_rank, backend, group_name="pp")


def model_parallel_is_initialized():
    """Check if tensor and pipeline parallel groups are initialized."""
    return _TP is not None and _PP is not None


def get_tensor_model_parallel_world_size():
    """Return world size for the tensor model parallel group."""
    return get_tp_group().world_size


def get_tensor_model_parallel_rank():
    """Return my rank for the tensor model parallel group."""
    return get_tp_group().rank_in_group


def destroy_model_parallel():
    global _TP, _PP
    for g in (_TP, _PP):
        if g is not None:
            g.destroy()
    _TP = _PP = None


def destroy_distributed_environment():
    global _WORLD
    if _WORLD is not None:
        _WORLD.destroy()
    _WORLD = None
    if tdist.is_initialized():
        tdist.destroy_process_group()
