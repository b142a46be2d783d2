"""Round trips through pinio.safetensors: every dtype numpy and torch 1.13
have, the reference writer's exact bytes, empty and scalar tensors,
metadata, shards with an index, filters, and what torch 1.13 / numpy lack."""
import json
import os

import numpy as np
import pytest
import torch

import pinio
from pinio.safetensors import SafetensorError, TensorSpec, deserialize, safe_open, serialize
from pinio.safetensors import numpy as stnp
from pinio.safetensors import torch as stpt

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.float16, np.int32, np.uint32,
             np.float32, np.complex64, np.float64, np.int64, np.uint64]
PT_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.float16, torch.bfloat16,
             torch.int32, torch.float32, torch.complex64, torch.float64, torch.int64]


def np_value(dt, shape):
    rng = np.random.default_rng(7)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt == np.complex64:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def pt_value(dt, shape):
    g = torch.Generator().manual_seed(7)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dt in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        info = torch.iinfo(dt)
        return torch.randint(max(info.min, -2**31), min(info.max, 2**31 - 1), shape,
                             generator=g, dtype=torch.int64).to(dt)
    if dt == torch.complex64:
        return torch.randn(shape, generator=g, dtype=torch.complex64)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dt)


def test_numpy_every_dtype(anydir):
    tensors = {f"t_{np.dtype(dt).name}": np_value(dt, (3, 5)) for dt in NP_DTYPES}
    path = os.path.join(anydir, "np.safetensors")
    stnp.save_file(tensors, path)
    loaded = stnp.load_file(path)
    assert sorted(loaded) == sorted(tensors)
    for k, v in tensors.items():
        assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape, k
        np.testing.assert_array_equal(loaded[k], v)
    # the in-memory path gives the same bytes as the file
    with open(path, "rb") as f:
        assert f.read() == stnp.save(tensors)
    for k, v in stnp.load(stnp.save(tensors)).items():
        np.testing.assert_array_equal(v, tensors[k])


def test_torch_every_dtype(anydir):
    tensors = {f"t_{str(dt).split('.')[-1]}": pt_value(dt, (4, 6)) for dt in PT_DTYPES}
    path = os.path.join(anydir, "pt.safetensors")
    stpt.save_file(tensors, path)
    loaded = stpt.load_file(path)
    for k, v in tensors.items():
        assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape, k
        assert torch.equal(loaded[k], v), k
    for k, v in stpt.load(stpt.save(tensors)).items():
        assert torch.equal(v, tensors[k]), k
    with safe_open(path, "pt") as f:
        assert f.get_tensor("t_bfloat16").dtype == torch.bfloat16


def test_reference_bytes():
    """upstream test_simple's exact images"""
    data = np.zeros((2, 2), dtype=np.int32)
    assert stnp.save({"test": data}) == (
        b'@\x00\x00\x00\x00\x00\x00\x00{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}'
        b"    " + b"\x00" * 16)
    a = stnp.save({"test1": data, "test2": np.zeros((2, 2), dtype=np.float16)})
    b = stnp.save({"test2": np.zeros((2, 2), dtype=np.float16), "test1": data})
    assert a == b
    assert a[:8] == b"\x80" + b"\x00" * 7
    assert a[8:].index(b"\x00") + 8 == 136
    m = stnp.save({"test1": data}, metadata={"framework": "pt"})
    assert m.startswith(b'`\x00\x00\x00\x00\x00\x00\x00{"__metadata__":{"framework":"pt"},"test1":')
    assert stnp.save({"test1": np.zeros((2, 2), dtype=">i4")},
                     metadata={"framework": "pt"}) == m  # big-endian input is swapped


def test_empty_and_scalar(anydir):
    tensors = {"empty": np.zeros((0, 4), np.float32), "scalar": np.asarray(3.5, np.float64),
               "b": np.asarray(False), "x": np.arange(4, dtype=np.int16)}
    path = os.path.join(anydir, "e.safetensors")
    stnp.save_file(tensors, path)
    loaded = stnp.load_file(path)
    assert loaded["empty"].shape == (0, 4)
    assert loaded["scalar"].shape == () and loaded["scalar"] == 3.5
    assert loaded["b"].dtype == np.bool_ and not loaded["b"]
    pt = stpt.load_file(path)
    assert pt["empty"].shape == (0, 4) and pt["scalar"].item() == 3.5
    with safe_open(path, "pt") as f:
        assert f.get_slice("scalar")[()].item() == 3.5
        assert f.get_slice("empty")[:].shape == (0, 4)


def test_metadata(tmp):
    path = os.path.join(tmp, "m.safetensors")
    stnp.save_file({"a": np.ones(3)}, path, metadata={"format": "np", "k": "v"})
    with safe_open(path, "np") as f:
        assert f.metadata() == {"format": "np", "k": "v"}
    stnp.save_file({"a": np.ones(3)}, path)
    with safe_open(path, "np") as f:
        assert f.metadata() is None


def test_keys_sorted_offset_keys_in_file_order(tmp):
    path = os.path.join(tmp, "k.safetensors")
    stnp.save_file({"b": np.ones(2, np.float64), "a": np.ones(2, np.int8),
                    "c": np.ones(2, np.float32)}, path)
    with safe_open(path, "np") as f:
        assert f.keys() == ["a", "b", "c"]
        assert f.offset_keys() == ["b", "c", "a"]  # F64, F32, I8: dtype descending
        assert list(f.get_tensors()) == ["b", "c", "a"]


def write_shards(d):
    """Two shards and an index; returns the tensors."""
    t1 = {"model.layers.0.w": np.arange(12, dtype=np.float32).reshape(3, 4),
          "model.layers.0.b": np.arange(4, dtype=np.float32)}
    t2 = {"model.layers.1.w": np.full((3, 4), 2.0, np.float32), "lm_head": np.ones(8, np.int64)}
    stnp.save_file(t1, os.path.join(d, "model-00001-of-00002.safetensors"))
    stnp.save_file(t2, os.path.join(d, "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in t1}
    wm.update({k: "model-00002-of-00002.safetensors" for k in t2})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, f)
    return {**t1, **t2}


def test_shards_index_and_filters(tmp):
    want = write_shards(tmp)
    got = pinio.load(tmp, framework="np")
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v)
    got = pinio.load(os.path.join(tmp, "model.safetensors.index.json"),
                     filter=["model.layers.1", "lm_*"])
    assert sorted(got) == ["lm_head", "model.layers.1.w"]
    assert isinstance(got["lm_head"], torch.Tensor)
    with pinio.open(tmp, framework="np", filter=["model.layers.0"]) as ck:
        assert ck.keys() == ["model.layers.0.b", "model.layers.0.w"]
        rep = ck.report()
        assert rep["files"] == 2 and rep["tensors"] == 2 and rep["skipped"] == 2
        assert len(ck.files()) == 2


def test_pread_backend_is_the_engines_pread_rung(tmp):
    path = os.path.join(tmp, "p.safetensors")
    stnp.save_file({"a": np.arange(1000, dtype=np.float32)}, path)
    with pinio.open(path, backend="pread") as ck:
        assert ck.report()["backend"] == "pread"
    np.testing.assert_array_equal(stnp.load_file(path, backend="pread")["a"], np.arange(1000))


def raw_file(d, code, nbytes=4, shape=(4,)):
    """A file with one tensor of dtype `code` written through TensorSpec."""
    buf = np.arange(nbytes, dtype=np.uint8)
    spec = {"x": TensorSpec(dtype=code, shape=list(shape), data_ptr=buf.ctypes.data,
                            data_len=buf.nbytes)}
    path = os.path.join(d, f"{code}.safetensors")
    from pinio.safetensors import serialize_file
    serialize_file(spec, path)
    return path


@pytest.mark.parametrize("dtype,code", [("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"),
                                        ("float8_e4m3fnuz", "F8_E4M3FNUZ"),
                                        ("float8_e5m2fnuz", "F8_E5M2FNUZ"),
                                        ("float8_e8m0fnu", "F8_E8M0"), ("uint16", "U16")])
def test_fp8_and_unsigned_map_to_torch_when_it_has_them(tmp, dtype, code):
    nbytes = 8 if code == "U16" else 4
    path = raw_file(tmp, dtype, nbytes=nbytes, shape=(4,))
    with safe_open(path, "pt") as f:
        assert f.get_slice("x").get_dtype() == code
        if hasattr(torch, {"U16": "uint16"}.get(code, dtype)):
            t = f.get_tensor("x")
            assert t.element_size() * t.nelement() == nbytes
        elif code == "U16":  # torch 1.13: a clear AttributeError naming the version that has it
            with pytest.raises(AttributeError, match=r"torch >= 2\."):
                f.get_tensor("x")
        else:  # torch 1.13: FP8 as its raw bytes (tests/python/test_quantized.py)
            t = f.get_tensor("x")
            assert t.dtype == torch.uint8 and t.pinio_dtype == code and t.pinio_shape == (4,)
            assert t.tolist() == [0, 1, 2, 3]


def test_numpy_bf16_raises_a_clear_error(tmp):
    path = os.path.join(tmp, "bf.safetensors")
    stpt.save_file({"x": torch.ones(3, dtype=torch.bfloat16)}, path)
    with pytest.raises(TypeError, match="numpy has no dtype"):
        stnp.load_file(path)


def test_serialize_deserialize():
    buf = np.arange(6, dtype=np.float32)
    out = serialize({"a": TensorSpec(dtype="float32", shape=[2, 3], data_ptr=buf.ctypes.data,
                                     data_len=buf.nbytes)}, metadata={"m": "1"})
    [(name, info)] = deserialize(out)
    assert name == "a" and info["shape"] == [2, 3] and info["dtype"] == "F32"
    assert bytes(info["data"]) == buf.tobytes()
    with pytest.raises(SafetensorError):
        TensorSpec(dtype="float128", shape=[1], data_ptr=0, data_len=16)


def test_verify_and_expected_digests(tmp):
    """CPU loads: each file's digest in the report; expected ones checked."""
    import hashlib
    p = os.path.join(tmp, "a.safetensors")
    stpt.save_file({"w": torch.arange(100000, dtype=torch.float32)}, p)
    with open(p, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with pinio.open(p, verify=True) as ck:
        assert ck.report()["verified"] and ck.report()["sha256"] == [digest]
    with pinio.open(p) as ck:
        assert ck.report()["sha256"] == [None]
    with pinio.open(p, expected_sha256=[digest]) as ck:
        assert ck.report()["verified"]
    with pytest.raises(pinio.Error, match=r"a\.safetensors: sha256 mismatch"):
        pinio.open(p, expected_sha256=["0" * 64])
