"""pinio.safetensors.torch: upstream's `safetensors.torch` over pinio:
load_file/load/save_file/save, save_model/load_model and the shared-storage
helpers save_model relies on (storage_ptr, storage_size, _end_ptr,
_find_shared_tensors, _is_complete, _remove_duplicate_names), with the same
errors and messages. Tensors from load_file view pinned memory (zero copy)
and keep it alive by reference.

torch 1.13 (Debian 12) lacks torch.uint16/32/64 (2.3): such tensors raise
AttributeError naming the version that has them, as upstream's lookup does.
The quantized dtypes load on every torch: FP8 (F8_E4M3, F8_E5M2, their FNUZ
kinds, F8_E8M0 scales), F4 and F6 come back in their torch dtype where this
torch has one (float8_*, float4_e2m1fn_x2), else as raw torch.uint8 (torch
1.13: every one of them; F6 has no torch dtype at all); either way the last
dimension counts bytes (F4: halved, as upstream's float4_e2m1fn_x2; F6: 3/4),
and a raw tensor carries its logical dtype and shape as the attributes
pinio_dtype and pinio_shape (safe_open's get_slice(k).get_dtype() and
get_shape() say the same)."""
import os
from collections import defaultdict

import torch

import pinio as _pinio_pkg
from . import TensorSpec, _load_whole, deserialize, safe_open, serialize, serialize_file

__all__ = ["save", "save_file", "load", "load_file", "save_model", "load_model"]


def storage_ptr(tensor):
    """Address of the storage under `tensor` (0 for a meta tensor)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:
        try:
            return tensor.storage().data_ptr()  # torch < 2.0
        except NotImplementedError:
            return 0


def storage_size(tensor):
    """Bytes of the storage under `tensor`."""
    try:
        return tensor.untyped_storage().nbytes()
    except AttributeError:
        try:
            return tensor.storage().size() * tensor.element_size()  # torch < 2.0
        except NotImplementedError:
            return tensor.nelement() * tensor.element_size()


def _end_ptr(tensor):
    """One past the last byte `tensor` covers."""
    if tensor.nelement():
        return tensor.view(-1)[-1].data_ptr() + tensor.element_size()
    return tensor.data_ptr()


def _filter_shared_not_shared(groups, state_dict):
    """Splits each same-storage group into runs whose byte ranges overlap."""
    result = []
    for group in groups:
        if len(group) < 2:
            result.append(group)
            continue
        spans = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n) for n in group)
        _, last_stop, first = spans[0]
        result.append({first})
        for start, stop, name in spans[1:]:
            if start >= last_stop:
                result.append({name})
            else:
                result[-1].add(name)
            last_stop = stop
    return result


def _find_shared_tensors(state_dict):
    """Groups of names whose tensors overlap in memory (singletons included)."""
    by_storage = defaultdict(set)
    for name, t in state_dict.items():
        if t.device != torch.device("meta") and storage_ptr(t) != 0 and storage_size(t) != 0:
            by_storage[(t.device, storage_ptr(t), storage_size(t))].add(name)
    return _filter_shared_not_shared(list(sorted(by_storage.values())), state_dict)


def _is_complete(tensor):
    """`tensor` covers its whole storage."""
    return (tensor.data_ptr() == storage_ptr(tensor)
            and tensor.nelement() * tensor.element_size() == storage_size(tensor))


def _remove_duplicate_names(state_dict, *, preferred_names=None, discard_names=None):
    """{kept name: [names sharing its storage, to drop]}."""
    preferred_names = set(preferred_names or [])
    discard_names = set(discard_names or [])
    to_remove = defaultdict(list)
    for shared in _find_shared_tensors(state_dict):
        complete = {n for n in shared if _is_complete(state_dict[n])}
        if not complete:
            raise RuntimeError(
                "Error while trying to find names to remove to save state dict, but found no "
                f"suitable name to keep for saving amongst: {shared}. None is covering the entire "
                "storage.Refusing to save/load the model since you could be storing much more "
                "memory than needed. Please refer to "
                "https://huggingface.co/docs/safetensors/torch_shared_tensors for more "
                "information. Or open an issue.")
        keep = min(complete)
        if complete - discard_names:
            keep = min(complete - discard_names)
        if preferred_names & complete:
            keep = min(preferred_names & complete)
        for name in sorted(shared):
            if name != keep:
                to_remove[keep].append(name)
    return to_remove


def _check_for_save(tensors):
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"Key `{k}` is invalid, expected torch.Tensor but received {type(v)}")
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError(
            f"You are trying to save a sparse tensors: `{sparse}` which this library does not "
            "support. You can make it a dense tensor before saving with `.to_dense()` but be "
            "aware this might make a much larger file than needed.")
    failing = [names for names in _find_shared_tensors(tensors) if len(names) > 1]
    if failing:
        raise RuntimeError(
            f"""
            Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: {failing}.
            A potential way to correctly save your model is to use `save_model`.
            More information at https://huggingface.co/docs/safetensors/torch_shared_tensors
            """)


def _flatten(tensors, keep):
    _check_for_save(tensors)
    specs = {}
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. It "
                "either means you are trying to save tensors which are reference of each other in "
                "which case it's recommended to save only the full tensors, and reslice at load "
                "time, or simply call `.contiguous()` on your tensor to pack it before saving.")
        if v.device.type != "cpu":
            v = v.to("cpu")
        keep.append(v)
        specs[k] = TensorSpec(dtype=str(v.dtype).split(".")[-1], shape=v.shape,
                              data_ptr=v.data_ptr(), data_len=v.nelement() * v.element_size())
    return specs


def save(tensors, metadata=None):
    """The bytes of a safetensors file holding `tensors`."""
    keep = []
    return serialize(_flatten(tensors, keep), metadata=metadata)


def save_file(tensors, filename, metadata=None):
    """Saves `tensors` to `filename` (pinio_save: O_DIRECT where allowed,
    temporary file + fsync + rename, the GIL released)."""
    keep = []
    serialize_file(_flatten(tensors, keep), os.fspath(filename), metadata=metadata)


def load_file(filename, device="cpu", *, backend="mmap", allocator=None, arena=None):
    """{name: torch.Tensor} of a safetensors file (or an s3:// object),
    zero-copy views of pinned memory; on device="cuda[:N]" one stream through pinio's CUDA sink
    (`allocator`: see safe_open). arena=pinio.Arena(): pinned memory kept
    across loads (pinio's own keyword; see safe_open)."""
    if device == "cpu" and allocator is None:
        return _load_whole(filename, "pt", backend=backend, arena=arena)
    with safe_open(filename, framework="pt", device=device, backend=backend,
                   allocator=allocator, arena=arena) as f:
        return f.get_tensors()


def load(data):
    """{name: torch.Tensor} from the bytes of a safetensors file."""
    out = {}
    for name, v in deserialize(data):
        out[name] = _pinio_pkg.tensor_from_buffer(v["data"] or None, v["dtype"], v["shape"],
                                                  "pt", name)
    return out


def save_model(model, filename, metadata=None, force_contiguous=True):
    """Saves `model`'s state dict, dropping names that share storage (each
    dropped name recorded in the metadata as pointing to the kept one)."""
    state_dict = model.state_dict()
    for kept, dropped in _remove_duplicate_names(state_dict).items():
        for name in dropped:
            if metadata is None:
                metadata = {}
            metadata.setdefault(name, kept)
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=metadata)
    except ValueError as e:
        raise ValueError(str(e) + " Or use save_model(..., force_contiguous=True), read the docs "
                         "for potential caveats.") from None


def load_model(model, filename, strict=True, device="cpu", *, backend="mmap"):
    """Loads `filename` into `model`; returns (missing, unexpected) names."""
    state_dict = load_file(filename, device=device, backend=backend)
    to_removes = _remove_duplicate_names(model.state_dict(), preferred_names=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    for dropped in to_removes.values():
        for name in dropped:
            if name in missing:
                missing.remove(name)
            else:
                unexpected.append(name)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected
