"""The upstream API's error cases: types and messages."""
import os
import struct

import numpy as np
import pytest
import torch

import pinio
import pinio.safetensors as st
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import numpy as stnp
from pinio.safetensors import torch as stpt


@pytest.fixture
def small(tmp):
    path = os.path.join(tmp, "s.safetensors")
    stnp.save_file({"a": np.ones((2, 2), np.float32)}, path)
    return path


def test_error_type_is_importable_from_its_module():
    import importlib

    mod = importlib.import_module(SafetensorError.__module__)
    assert getattr(mod, "SafetensorError") is SafetensorError
    assert issubclass(SafetensorError, Exception)


def test_file_not_found():
    with pytest.raises(FileNotFoundError) as e:
        safe_open("notafile", framework="pt")
    assert str(e.value) == "No such file or directory: notafile"  # upstream: no quotes


def test_framework_device_backend(small):
    with pytest.raises(SafetensorError, match="framework nope is invalid"):
        safe_open(small, framework="nope")
    with pytest.raises(SafetensorError, match="device nope is invalid"):
        safe_open(small, framework="pt", device="nope")
    with pytest.raises(SafetensorError, match="Device cuda:0 is not supported for framework np"):
        safe_open(small, framework="np", device="cuda:0")
    for dev in ("cuda", 0, "cuda:1"):  # valid: the device is used at the first get_tensor
        safe_open(small, framework="pt", device=dev).close()
    with pytest.raises(SafetensorError, match="backend"):
        safe_open(small, framework="pt", backend="io_uring")


def test_closed_file(small):
    with safe_open(small, framework="pt") as f:
        pass
    for call in (f.keys, f.metadata, lambda: f.get_tensor("a"), lambda: f.get_slice("a")):
        with pytest.raises(SafetensorError, match="File is closed"):
            call()


def test_missing_tensor(small):
    with safe_open(small, framework="np") as f:
        with pytest.raises(SafetensorError, match="File does not contain tensor b"):
            f.get_tensor("b")
        with pytest.raises(SafetensorError):
            f.get_slice("b")


HDR = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'


def test_bad_headers(tmp):
    path = os.path.join(tmp, "bad.safetensors")
    cases = {
        b"\x01": "HeaderTooSmall",
        struct.pack("<Q", 1000) + b"{}": "InvalidHeaderLength",
        struct.pack("<Q", 2) + b"{]": "InvalidHeaderDeserialization",
        struct.pack("<Q", len(HDR)) + HDR + b"\0" * 4: "MetadataIncompleteBuffer",
    }
    for data, rule in cases.items():
        with open(path, "wb") as f:
            f.write(data)
        with pytest.raises(SafetensorError) as e:
            safe_open(path, framework="np")
        assert str(e.value).startswith("Error while deserializing header: ")
        assert rule in str(e.value) and path in str(e.value)
        with pytest.raises(SafetensorError, match=rule):
            st.deserialize(data)


def test_serialize_wants_tensorspecs():
    with pytest.raises(TypeError):
        st.serialize({"test": {"dtype": "float32", "shape": [1]}})


def test_torch_save_errors(tmp):
    path = os.path.join(tmp, "t.safetensors")
    with pytest.raises(ValueError, match="Expected a dict of \\[str, torch.Tensor\\]"):
        stpt.save_file([torch.ones(2)], path)
    with pytest.raises(ValueError, match="Key `a` is invalid, expected torch.Tensor"):
        stpt.save_file({"a": 1}, path)
    with pytest.raises(ValueError, match="You are trying to save a sparse tensors"):
        stpt.save_file({"a": torch.eye(3).to_sparse()}, path)
    with pytest.raises(ValueError, match="You are trying to save a non contiguous tensor: `a`"):
        stpt.save_file({"a": torch.ones(4, 4)[:, 1]}, path)
    base = torch.ones(10)
    with pytest.raises(RuntimeError, match="Some tensors share memory"):
        stpt.save_file({"a": base, "b": base[:5]}, path)
    assert not os.listdir(tmp)  # nothing written by a refused save


def test_pinio_error_names_the_file(tmp):
    with pytest.raises(pinio.Error) as e:
        pinio.load(os.path.join(tmp, "missing.safetensors"))
    assert e.value.errno == 2 and "missing.safetensors" in e.value.strerror


def test_safe_open_handle(small):
    with open(small, "rb") as fh:
        with st._safe_open_handle(fh, "np") as f:
            assert f.keys() == ["a"]
