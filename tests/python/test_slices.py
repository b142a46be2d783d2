"""get_slice reads only what it needs: a first-dimension slice (the
tensor-parallel row shard) reads exactly those rows' bytes, counted twice:
by the safe_open object and by the kernel (/proc/self/io rchar). Results
equal numpy/torch indexing of the whole tensor; the numpy path keeps
upstream's narrowing rules and messages."""
import os

import numpy as np
import pytest
import torch

from conftest import rchar
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import numpy as stnp

ROWS, COLS = 64, 256  # float32 rows of 1 KiB


@pytest.fixture
def matrix(tmp):
    a = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    path = os.path.join(tmp, "m.safetensors")
    stnp.save_file({"before": np.ones(1000, np.float64), "w": a, "z": np.ones(7, np.int8)}, path)
    return path, a


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("lo,hi", [(0, 16), (16, 32), (48, 64), (5, 6)])
def test_row_shard_reads_only_its_rows(matrix, framework, lo, hi):
    path, a = matrix
    with safe_open(path, framework) as f:
        s = f.get_slice("w")
        before_k = rchar()
        got = s[lo:hi]
        read_k = rchar() - before_k
        want = (hi - lo) * COLS * 4
        assert f.pinio_bytes_read == want
        # the kernel saw one pread of exactly these bytes (plus nothing else)
        assert want <= read_k < want + 4096, read_k
        np.testing.assert_array_equal(np.asarray(got), a[lo:hi])


@pytest.mark.parametrize("index", [
    np.s_[3], np.s_[-1], np.s_[2:9, 5], np.s_[2:9, -3], np.s_[:, :7], np.s_[10:20:3],
    np.s_[::-1] if False else np.s_[::5], np.s_[60:], np.s_[1, 2:4], np.s_[...], np.s_[[1, 3]],
    np.s_[None, 2], np.s_[-5:-1], np.s_[5:2],
])
def test_torch_path_is_torch_indexing(matrix, index):
    path, a = matrix
    ref = torch.from_numpy(a)
    with safe_open(path, "pt") as f:
        got = f.get_slice("w")[index]
        assert torch.equal(got, ref[index])
        if isinstance(index, slice) and index.step in (None, 1) and index != slice(None):
            r = range(*index.indices(ROWS))
            assert f.pinio_bytes_read == len(r) * COLS * 4


def test_covering_rows_for_other_slices(matrix):
    path, a = matrix
    with safe_open(path, "np") as f:
        got = f.get_slice("w")[10:12, 100:110]
        np.testing.assert_array_equal(got, a[10:12, 100:110])
        assert f.pinio_bytes_read == 2 * COLS * 4  # the two covering rows, not the tensor


def test_numpy_path_rules_and_messages(matrix):
    path, a = matrix
    with safe_open(path, "np") as f:
        s = f.get_slice("w")
        assert s.get_shape() == [ROWS, COLS] and s.get_dtype() == "F32"
        np.testing.assert_array_equal(s[:], a)
        np.testing.assert_array_equal(s[2:, -COLS], a[2:, -COLS])
        assert s[[]].shape == (0, COLS)
        with pytest.raises(SafetensorError) as e:
            s[2:, -COLS - 1]
        assert str(e.value) == f"Invalid index {-COLS - 1} for dimension 1 of size {COLS}"
        with pytest.raises(SafetensorError) as e:
            s[:ROWS + 1]
        assert str(e.value) == (f"Error during slicing [:{ROWS + 1}] with shape [{ROWS}, {COLS}]: "
                                f"index {ROWS} out of bounds for tensor dimension #0 of size {ROWS}")
        with pytest.raises(SafetensorError, match="Non empty lists are not implemented"):
            s[[1]]
        with pytest.raises(SafetensorError, match="more slicing indexes than dimensions"):
            s[1, 2, 3]
        with pytest.raises(OverflowError):
            s[-3:]
        # steps are honoured (upstream ignores them silently)
        np.testing.assert_array_equal(s[0:10:3, 0:4], a[0:10:3, 0:4])


def test_slice_result_outlives_the_file(matrix):
    path, a = matrix
    with safe_open(path, "pt") as f:
        part = f.get_slice("w")[4:8]
    os.unlink(path)
    assert torch.equal(part, torch.from_numpy(a[4:8]))
