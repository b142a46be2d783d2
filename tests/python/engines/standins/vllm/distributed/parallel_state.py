"""Stand-in of vllm/distributed/parallel_state.py at
0c175ae9295b575078961a68c4d3a2a838dce5ef: a GroupCoordinator per group
(rank, ranks, world_size, local_rank, rank_in_group, cpu_group: a gloo
group of the same ranks, device_group: one of the job's backend), the
world group (init_distributed_environment, get_world_group) and the
tensor-parallel group (initialize_model_parallel, get_tp_group,
get_tensor_model_parallel_rank/_world_size), model_parallel_is_initialized
(_TP and _PP set) and the destroy functions. Left out: the device
communicators, message-queue broadcasters, the DCP/PCP/DP/EP groups, data
parallelism's rank offsets; the pipeline-parallel group is built with
pipeline_model_parallel_size only. Here the device group is gloo too (the
job's backend is gloo: no GPU)."""
from typing import Optional

import torch
import torch.distributed


class GroupCoordinator:
    """PyTorch ProcessGroup wrapper for a group of processes: one device
    group and one gloo cpu group of the same ranks."""

    def __init__(self, group_ranks, local_rank, torch_distributed_backend,
                 use_device_communicator=False, use_message_queue_broadcaster=False,
                 group_name=None):
        self.unique_name = group_name or "anonymous"
        self.rank = torch.distributed.get_rank()
        self.local_rank = local_rank
        self_device_group = self_cpu_group = None
        for ranks in group_ranks:
            device_group = torch.distributed.new_group(ranks, backend=torch_distributed_backend)
            # a group with `gloo` backend, to allow direct coordination
            # between processes through the CPU
            cpu_group = torch.distributed.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
                self_device_group = device_group
                self_cpu_group = cpu_group
        assert self_cpu_group is not None
        assert self_device_group is not None
        self.cpu_group = self_cpu_group
        self.device_group = self_device_group
        self.device = torch.device("cpu")

    @property
    def first_rank(self):
        return self.ranks[0]

    @property
    def is_first_rank(self):
        return self.rank == self.first_rank

    def destroy(self):
        if self.device_group is not None:
            torch.distributed.destroy_process_group(self.device_group)
            self.device_group = None
        if self.cpu_group is not None:
            torch.distributed.destroy_process_group(self.cpu_group)
            self.cpu_group = None


_WORLD: Optional[GroupCoordinator] = None
_TP: Optional[GroupCoordinator] = None
_PP: Optional[GroupCoordinator] = None


def get_world_group() -> GroupCoordinator:
    assert _WORLD is not None, "world group is not initialized"
    return _WORLD


def get_tp_group() -> GroupCoordinator:
    assert _TP is not None, "tensor model parallel group is not initialized"
    return _TP


def get_pp_group() -> GroupCoordinator:
    assert _PP is not None, "pipeline model parallel group is not initialized"
    return _PP


def init_distributed_environment(world_size=-1, rank=-1, distributed_init_method="env://",
                                 local_rank=-1, backend="nccl", timeout=None):
    global _WORLD
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend, init_method=distributed_init_method,
                                             world_size=world_size, rank=rank,
                                             **({"timeout": timeout} if timeout else {}))
    if local_rank == -1:
        local_rank = rank
    if _WORLD is None:
        ranks = list(range(torch.distributed.get_world_size()))
        _WORLD = GroupCoordinator([ranks], local_rank, backend, group_name="world")
    else:
        assert _WORLD.world_size == torch.distributed.get_world_size(), (
            "world group already initialized with a different world size")


def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                              backend=None):
    # the layout order is PP x TP, as upstream's (less DP, PCP)
    assert torch.distributed.is_initialized()
    world_size = torch.distributed.get_world_size()
    backend = backend or torch.distributed.get_backend(get_world_group().device_group)
    all_ranks = torch.arange(world_size).reshape(-1, pipeline_model_parallel_size,
                                                 tensor_model_parallel_size)
    global _TP, _PP
    assert _TP is None, "tensor model parallel group is already initialized"
    group_ranks = [x.tolist() for x in all_ranks.view(-1, tensor_model_parallel_size).unbind(0)]
    _TP = GroupCoordinator(group_ranks, get_world_group().local_rank, backend, group_name="tp")
    assert _PP is None, "pipeline model parallel group is already initialized"
    group_ranks = [x.tolist() for x in
                   all_ranks.transpose(1, 2).reshape(-1, pipeline_model_parallel_size).unbind(0)]
    _PP = GroupCoordinator(group_ranks, get_world_group().local_rank, backend, group_name="pp")


def model_parallel_is_initialized():
    """Check if tensor and pipeline parallel groups are initialized."""
    return _TP is not None and _PP is not None


def get_tensor_model_parallel_world_size() -> int:
    return get_tp_group().world_size


def get_tensor_model_parallel_rank() -> int:
    return get_tp_group().rank_in_group


def destroy_model_parallel():
    global _TP, _PP
    if _TP:
        _TP.destroy()
    _TP = None
    if _PP:
        _PP.destroy()
    _PP = None


def destroy_distributed_environment():
    global _WORLD
    if _WORLD:
        _WORLD.destroy()
    _WORLD = None
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
