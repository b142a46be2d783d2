"""pinio.safetensors.numpy: upstream's `safetensors.numpy` (load_file, load,
save_file, save) over pinio. Arrays from load_file are zero-copy views of
pinned memory (upstream copies them); BF16/F8/F4 tensors raise TypeError, as
numpy has no such dtypes without ml_dtypes (Debian 12 ships none)."""
import os
import sys

import numpy as np

import pinio as _pinio_pkg
from . import TensorSpec, _load_whole, deserialize, serialize, serialize_file
from . import safe_open  # noqa: F401 (upstream's safetensors.numpy has it too)

__all__ = ["save", "save_file", "load", "load_file"]


def _flatten(tensor_dict, keep):
    if not isinstance(tensor_dict, dict):
        raise ValueError(f"Expected a dict of [str, np.ndarray] but received {type(tensor_dict)}")
    specs = {}
    for k, v in tensor_dict.items():
        if not isinstance(v, np.ndarray):
            raise ValueError(f"Key `{k}` is invalid, expected np.ndarray but received {type(v)}")
        if v.dtype.byteorder == ">" or (v.dtype.byteorder == "=" and sys.byteorder == "big"):
            v = v.byteswap().view(v.dtype.newbyteorder("<"))  # the format is little-endian
        # Upstream reads ctypes.data without checking layout; a strided view
        # would save the wrong bytes, so pack it (a copy only when needed).
        if not v.flags.c_contiguous:  # (ascontiguousarray would make a 0-d array 1-d)
            v = np.ascontiguousarray(v)
        keep.append(v)
        name = "bool" if v.dtype == np.bool_ else v.dtype.name
        specs[k] = TensorSpec(dtype=name, shape=v.shape, data_ptr=v.ctypes.data,
                              data_len=v.nbytes)
    return specs


def save(tensor_dict, metadata=None):
    """The bytes of a safetensors file holding `tensor_dict`."""
    keep = []
    return serialize(_flatten(tensor_dict, keep), metadata=metadata)


def save_file(tensor_dict, filename, metadata=None):
    """Saves `tensor_dict` to `filename` (pinio_save: temporary file, fsync, rename)."""
    keep = []
    serialize_file(_flatten(tensor_dict, keep), os.fspath(filename), metadata=metadata)


def load(data):
    """{name: np.ndarray} from the bytes of a safetensors file."""
    out = {}
    for name, v in deserialize(data):
        dt = _pinio_pkg.numpy_dtype(v["dtype"], name)
        arr = np.frombuffer(v["data"], dtype=dt) if v["data"] else np.zeros(v["shape"], dt)
        out[name] = arr.reshape(v["shape"])
    return out


def load_file(filename, *, backend="mmap"):
    """{name: np.ndarray} of a safetensors file (or an s3:// object), zero-copy."""
    return _load_whole(filename, "np", backend=backend)
