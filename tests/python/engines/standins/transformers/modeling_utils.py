"""Stand-in of huggingface/transformers src/transformers/modeling_utils.py.

The binding: `from safetensors import safe_open` at module level (as at
040ba146759afc625c77f49d04982bb54873995f); upstream safetensors is not
installed here, so the stand-in's own safe_open records the call and
refuses (an unpatched load fails loudly).

_load_pretrained_model replays v5's safetensors branch (as recorded in the
design note engines.md §1.3 and read from the index's copy of the file,
commit not recorded there): per file, backend "pread" on MPS and Windows
else "mmap", safe_open(file, framework="pt", device=device,
backend=backend), the handle added to a set, merged_state_dict[k] =
file_pointer.get_slice(k) for every key first; then
convert_and_load_state_dict_in_model materialises each slice from a thread
pool (spawn_materialize: `tensor[...]`, or a tuple of slices where a
tensor-parallel plan shards it); then every handle gets
__exit__(None, None, None). The model's parameters are then the
materialised tensors, used after the handles closed."""
from concurrent.futures import ThreadPoolExecutor

try:
    from safetensors import safe_open
except ImportError:
    CALLS = []

    def safe_open(filename, framework, device="cpu", **kw):
        CALLS.append(filename)
        raise ImportError("stand-in transformers: upstream safetensors is not installed")


def _load_pretrained_model(checkpoint_files, is_mps=False, shard_plan=None):
    """{name: tensor} as v5 builds it; shard_plan: {name: index} (a tuple of
    slices) for the keys a tensor-parallel plan reads in part."""
    all_pointer = set()
    merged_state_dict = {}
    for file in checkpoint_files:
        backend, device = ("pread", "cpu") if is_mps else ("mmap", "cpu")
        file_pointer = safe_open(file, framework="pt", device=device, backend=backend)
        all_pointer.add(file_pointer)
        for k in file_pointer.keys():
            merged_state_dict[k] = file_pointer.get_slice(k)  # don't materialize yet

    def spawn_materialize(k, sl):
        idx = (shard_plan or {}).get(k)
        return k, (sl[idx] if idx is not None else sl[...])

    with ThreadPoolExecutor(max_workers=4) as pool:
        out = dict(pool.map(lambda kv: spawn_materialize(*kv), merged_state_dict.items()))
    for k in all_pointer:
        k.__exit__(None, None, None)
    return out
