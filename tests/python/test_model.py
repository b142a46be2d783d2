"""save_model / load_model with shared (tied) weights, and the helpers."""
import os

import pytest
import torch

from pinio.safetensors import safe_open
from pinio.safetensors import torch as stpt


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(10, 10)
        self.b = self.a  # same parameters under two names


def test_save_model_drops_shared_names_and_load_model_restores(tmp):
    path = os.path.join(tmp, "model.safetensors")
    m = Tied()
    with pytest.raises(RuntimeError, match="Some tensors share memory"):
        stpt.save_file(m.state_dict(), path)
    stpt.save_model(m, path)
    with safe_open(path, "pt") as f:
        assert f.keys() == ["a.bias", "a.weight"]
        assert f.metadata() == {"b.bias": "a.bias", "b.weight": "a.weight"}
    m2 = Tied()
    missing, unexpected = stpt.load_model(m2, path)
    assert not missing and not unexpected
    assert torch.equal(m2.a.weight, m.a.weight)


def test_load_model_strict_reports_names(tmp):
    path = os.path.join(tmp, "lin.safetensors")
    stpt.save_file({"weight": torch.ones(2, 3)}, path)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
        stpt.load_model(torch.nn.Linear(3, 2), path)
    missing, unexpected = stpt.load_model(torch.nn.Linear(3, 2), path, strict=False)
    assert missing == {"bias"} and unexpected == []


def test_shared_helpers():
    m = torch.zeros(10)
    assert stpt._find_shared_tensors({"a": m, "b": m[:5], "c": torch.zeros(2)}) == \
        [{"a", "b"}, {"c"}]
    assert stpt._is_complete(m) and not stpt._is_complete(m[2:])
    assert stpt.storage_size(m) == 40 and stpt.storage_ptr(m) == m.data_ptr()
    assert stpt._end_ptr(m) == m.data_ptr() + 40
    assert stpt._remove_duplicate_names({"a": m, "b": m}) == {"a": ["b"]}
    assert stpt._remove_duplicate_names({"a": m, "b": m}, preferred_names=["b"]) == {"b": ["a"]}
