"""Stand-in of python/sglang/srt/model_loader/weight_utils.py's two
safetensors iterators: safetensors_weights_iterator(hf_weights_files,
is_all_weights_sharded=False, decryption_key=None, disable_mmap=False)
(at 57003beaaa7b23e3a29a045eeb72e329936a9ce8 without the last two, added
later) and buffered_multi_thread_safetensors_weights_iterator(
hf_weights_files, max_workers, disable_mmap=False, prefetch=False,
prefetch_num_threads=4, drop_cache_after_load=False) (sglang #20289, as
recorded in the design note engines.md). Upstream safetensors is not
installed here: each records its call in CALLS and yields one marker."""
import torch

CALLS = []


def safetensors_weights_iterator(hf_weights_files, is_all_weights_sharded=False,
                                 decryption_key=None, disable_mmap=False):
    CALLS.append(("safetensors_weights_iterator", list(hf_weights_files), decryption_key))
    yield "__sglang_original__", torch.zeros(1)


def buffered_multi_thread_safetensors_weights_iterator(hf_weights_files, max_workers,
                                                       disable_mmap=False, prefetch=False,
                                                       prefetch_num_threads=4,
                                                       drop_cache_after_load=False):
    CALLS.append(("buffered_multi_thread_safetensors_weights_iterator",
                  list(hf_weights_files), None))
    yield "__sglang_original__", torch.zeros(1)
