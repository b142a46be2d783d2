"""Stand-in of the binding in python/sglang/srt/model_loader/loader.py: it
imports both iterators with `from ...weight_utils import ...` at import time
(a binding a plain setattr on weight_utils would leave stale) and picks the
buffered one by default, safetensors_weights_iterator with prefetch."""
from sglang.srt.model_loader.weight_utils import (
    buffered_multi_thread_safetensors_weights_iterator,
    safetensors_weights_iterator,
)


def get_weights_iterator(hf_weights_files, prefetch=False, decryption_key=None):
    if prefetch or decryption_key:
        return safetensors_weights_iterator(hf_weights_files, False,
                                            decryption_key=decryption_key)
    return buffered_multi_thread_safetensors_weights_iterator(hf_weights_files, 8,
                                                              disable_mmap=False)
