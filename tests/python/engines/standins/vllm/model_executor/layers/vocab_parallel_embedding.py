"""Stand-in of vllm/model_executor/layers/vocab_parallel_embedding.py at
00db0119c37674b956dec4228d4e571549020976: VocabParallelEmbedding and
ParallelLMHead as a loader meets them. The weight has output_dim 0 like
a column-parallel one, but its rows are the vocabulary padded to a
multiple of DEFAULT_VOCAB_PADDING_SIZE and split by the padded size, so
rank r's rows are not torch.chunk's: its weight_loader narrows the
original vocabulary's [start, end) of this shard, copies it and zeroes
the padding. A loader must hand it the whole tensor. Left out: added
(LoRA) vocabulary, packed (quantized) weights, forward."""
import torch
from torch import nn

DEFAULT_VOCAB_PADDING_SIZE = 64


def pad_vocab_size(vocab_size, pad_to=DEFAULT_VOCAB_PADDING_SIZE):
    return ((vocab_size + pad_to - 1) // pad_to) * pad_to


class VocabParallelEmbedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, params_dtype=torch.float32, tp_rank=0,
                 tp_size=1):
        super().__init__()
        self.tp_rank, self.tp_size = tp_rank, tp_size
        self.org_vocab_size = num_embeddings
        padded = pad_vocab_size(num_embeddings, DEFAULT_VOCAB_PADDING_SIZE * 1)
        self.num_embeddings_padded = pad_vocab_size(padded, tp_size)
        self.num_embeddings_per_partition = self.num_embeddings_padded // tp_size
        start = tp_rank * self.num_embeddings_per_partition
        self.org_vocab_start_index = min(start, num_embeddings)
        self.org_vocab_end_index = min(start + self.num_embeddings_per_partition, num_embeddings)
        self.weight = nn.Parameter(torch.zeros((self.num_embeddings_per_partition, embedding_dim),
                                               dtype=params_dtype), requires_grad=False)
        self.weight.input_dim, self.weight.output_dim = 1, 0
        self.weight.weight_loader = self.weight_loader

    def weight_loader(self, param, loaded_weight):
        output_dim = getattr(param, "output_dim", None)
        if output_dim is None:
            assert param.data.shape == loaded_weight.shape
            param.data.copy_(loaded_weight)
            return
        start_idx = self.org_vocab_start_index
        shard_size = self.org_vocab_end_index - start_idx
        assert loaded_weight.shape[output_dim] == self.org_vocab_size
        loaded_weight = loaded_weight.narrow(output_dim, start_idx, shard_size)
        param[:loaded_weight.shape[0]].data.copy_(loaded_weight)
        param[loaded_weight.shape[0]:].data.fill_(0)


class ParallelLMHead(VocabParallelEmbedding):
    pass
