"""Stand-in of vllm/model_executor/layers/linear.py at
0036d38de46c5d48fdedeb658dedc0fc0f95677d: the tensor-parallel linear
layers' parameters and their v1 weight_loaders, which a loader meets:
ColumnParallelLinear (weight output_dim 0, narrowed by tp_rank unless
param.is_sharded_weight), MergedColumnParallelLinear (each of
output_sizes narrowed by tp_rank into its offset), QKVParallelLinear (q by
tp_rank, k/v by tp_rank // num_kv_head_replicas when the KV heads are
fewer than the ranks, each into its offset; is_sharded_weight skips the
narrowing, not the offsets) and RowParallelLinear (weight input_dim 1).
Parameters are plain torch Parameters with set_weight_attrs' attributes
(output_dim, input_dim, weight_loader: the layer's bound weight_loader),
as UnquantizedLinearMethod made them before weight_loader_v2. Left out:
quantization (packed_dim, scales, marlin), biases, weight_loader_v2 and
vLLM's BasevLLMParameter (model_executor/parameter.py@0045689bdb239a1c
53951f3847b9475098f36ef7, whose load_*_weight narrow by tp_rank whatever
is_sharded_weight says), forward passes. tp_rank/tp_size are given to the
constructor (upstream reads get_tensor_model_parallel_rank/_world_size)."""
import torch
from torch import nn


def divide(a, b):
    assert a % b == 0, f"{a} is not divisible by {b}"
    return a // b


def _param(layer, shape, dtype, **attrs):
    p = nn.Parameter(torch.zeros(shape, dtype=dtype), requires_grad=False)
    for k, v in attrs.items():
        setattr(p, k, v)
    p.weight_loader = layer.weight_loader
    return p


def _load_narrowed(layer, param, loaded_weight, dim):
    """Column's weight_loader (dim: output_dim) and Row's (input_dim), one
    text here: narrowed by tp_rank unless is_sharded_weight, then copied."""
    is_sharded_weight = getattr(param, "is_sharded_weight", False)
    param_data = param.data
    if dim is not None and not is_sharded_weight:
        shard_size = param_data.shape[dim]
        start_idx = layer.tp_rank * shard_size
        loaded_weight = loaded_weight.narrow(dim, start_idx, shard_size)
    assert param_data.shape == loaded_weight.shape
    param_data.copy_(loaded_weight)


class LinearBase(nn.Module):
    def __init__(self, input_size, output_size, params_dtype=torch.float32, tp_rank=0,
                 tp_size=1, disable_tp=False):
        super().__init__()
        self.input_size, self.output_size = input_size, output_size
        self.params_dtype = params_dtype
        self.tp_rank, self.tp_size = (0, 1) if disable_tp else (tp_rank, tp_size)


class ColumnParallelLinear(LinearBase):
    def __init__(self, input_size, output_size, params_dtype=torch.float32, tp_rank=0,
                 tp_size=1, disable_tp=False):
        super().__init__(input_size, output_size, params_dtype, tp_rank, tp_size, disable_tp)
        self.output_size_per_partition = divide(output_size, self.tp_size)
        self.weight = _param(self, (self.output_size_per_partition, input_size), params_dtype,
                             input_dim=1, output_dim=0)

    def weight_loader(self, param, loaded_weight):
        _load_narrowed(self, param, loaded_weight, getattr(param, "output_dim", None))


class MergedColumnParallelLinear(ColumnParallelLinear):
    def __init__(self, input_size, output_sizes, params_dtype=torch.float32, tp_rank=0,
                 tp_size=1, disable_tp=False):
        self.output_sizes = output_sizes
        super().__init__(input_size, sum(output_sizes), params_dtype, tp_rank, tp_size,
                         disable_tp)
        assert all(s % self.tp_size == 0 for s in output_sizes)

    def weight_loader(self, param, loaded_weight, loaded_shard_id=None):
        assert loaded_shard_id is not None  # the fused-on-disk case is not stood in
        param_data = param.data
        output_dim = getattr(param, "output_dim", None)
        if output_dim is not None:
            shard_offset = sum(self.output_sizes[:loaded_shard_id]) // self.tp_size
            shard_size = self.output_sizes[loaded_shard_id] // self.tp_size
            is_sharded_weight = getattr(param, "is_sharded_weight", False)
            param_data = param_data.narrow(output_dim, shard_offset, shard_size)
            start_idx = self.tp_rank * shard_size
            if not is_sharded_weight:
                loaded_weight = loaded_weight.narrow(output_dim, start_idx, shard_size)
        assert param_data.shape == loaded_weight.shape
        param_data.copy_(loaded_weight)


class QKVParallelLinear(ColumnParallelLinear):
    def __init__(self, hidden_size, head_size, total_num_heads, total_num_kv_heads,
                 params_dtype=torch.float32, tp_rank=0, tp_size=1, disable_tp=False):
        self.hidden_size, self.head_size = hidden_size, head_size
        self.total_num_heads, self.total_num_kv_heads = total_num_heads, total_num_kv_heads
        tp_size = 1 if disable_tp else tp_size
        self.num_heads = divide(total_num_heads, tp_size)
        if tp_size >= total_num_kv_heads:
            self.num_kv_heads = 1
            self.num_kv_head_replicas = divide(tp_size, total_num_kv_heads)
        else:
            self.num_kv_heads = divide(total_num_kv_heads, tp_size)
            self.num_kv_head_replicas = 1
        output_size = (self.num_heads + 2 * self.num_kv_heads) * tp_size * head_size
        self.output_sizes = [self.num_heads * head_size * tp_size,
                             self.num_kv_heads * head_size * tp_size,
                             self.num_kv_heads * head_size * tp_size]
        super().__init__(hidden_size, output_size, params_dtype, tp_rank, tp_size, disable_tp)

    def weight_loader(self, param, loaded_weight, loaded_shard_id=None):
        assert loaded_shard_id in ("q", "k", "v")  # the fused-on-disk case is not stood in
        param_data = param.data
        output_dim = getattr(param, "output_dim", None)
        if output_dim is not None:
            if loaded_shard_id == "q":
                shard_offset, shard_size = 0, self.num_heads * self.head_size
            elif loaded_shard_id == "k":
                shard_offset = self.num_heads * self.head_size
                shard_size = self.num_kv_heads * self.head_size
            else:
                shard_offset = (self.num_heads + self.num_kv_heads) * self.head_size
                shard_size = self.num_kv_heads * self.head_size
            is_sharded_weight = getattr(param, "is_sharded_weight", False)
            param_data = param_data.narrow(output_dim, shard_offset, shard_size)
            if loaded_shard_id == "q":
                shard_id = self.tp_rank
            else:
                shard_id = self.tp_rank // self.num_kv_head_replicas
            start_idx = shard_id * shard_size
            if not is_sharded_weight:
                loaded_weight = loaded_weight.narrow(output_dim, start_idx, shard_size)
        assert param_data.shape == loaded_weight.shape, (param_data.shape, loaded_weight.shape)
        param_data.copy_(loaded_weight)


class RowParallelLinear(LinearBase):
    def __init__(self, input_size, output_size, params_dtype=torch.float32, tp_rank=0,
                 tp_size=1, disable_tp=False):
        super().__init__(input_size, output_size, params_dtype, tp_rank, tp_size, disable_tp)
        self.input_size_per_partition = divide(input_size, self.tp_size)
        self.weight = _param(self, (output_size, self.input_size_per_partition), params_dtype,
                             input_dim=1, output_dim=0)

    def weight_loader(self, param, loaded_weight):
        _load_narrowed(self, param, loaded_weight, getattr(param, "input_dim", None))
