"""The Hugging Face hub cache as an input, offline: a snapshot folder, its
index, a repo id (ORG/NAME[@REV]) and safe_open of a cached file, on a
cache tree laid out as huggingface_hub writes it (every snapshot file a
link into blobs/, the index too, refs/main naming the commit)."""
import hashlib
import json
import os

import numpy as np
import pytest

import pinio
from pinio.safetensors import safe_open
from pinio.safetensors import numpy as stnp

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hub_tree(root, repo="org/tiny"):
    """CACHE=root/models--ORG--NAME with three shards and an index, all
    links into blobs/ named by their SHA-256; returns (model folder, tensors)."""
    os.makedirs(root, exist_ok=True)
    model = os.path.join(root, "models--" + repo.replace("/", "--"))
    snap = os.path.join(model, "snapshots", COMMIT)
    for sub in ("blobs", "refs", snap):
        os.makedirs(os.path.join(model, sub), exist_ok=True)
    want, wm = {}, {}
    for i in range(3):
        name = f"model-{i + 1:05d}-of-00003.safetensors"
        t = {f"layers.{i}.w": np.arange(12, dtype=np.float32).reshape(3, 4) + 100 * i,
             f"layers.{i}.b": np.full(5, i, np.int64)}
        want.update(t)
        wm.update({k: name for k in t})
        stnp.save_file(t, os.path.join(root, name))
    with open(os.path.join(root, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    for name in sorted(set(wm.values())) + ["model.safetensors.index.json"]:
        src = os.path.join(root, name)
        with open(src, "rb") as f:
            blob = hashlib.sha256(f.read()).hexdigest()
        os.rename(src, os.path.join(model, "blobs", blob))
        os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snap, name))
    with open(os.path.join(model, "refs", "main"), "w") as f:
        f.write(COMMIT)
    return model, want


def same(got, want):
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v)


def test_snapshot_folder_index_and_repo_id(tmp, monkeypatch):
    model, want = hub_tree(tmp)
    snap = os.path.join(model, "snapshots", COMMIT)
    same(pinio.load(snap, framework="np"), want)
    same(pinio.load(os.path.join(snap, "model.safetensors.index.json"), framework="np"), want)
    for var in ("HF_HUB_CACHE", "HF_HOME", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", tmp)
    for spec in ("org/tiny", "org/tiny@main", "org/tiny@" + COMMIT):
        same(pinio.load(spec, framework="np"), want)


def test_hf_home_and_the_default_cache(tmp, monkeypatch):
    for var in ("HF_HUB_CACHE", "HF_HOME", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    home = os.path.join(tmp, "hfhome")
    _, want = hub_tree(os.path.join(home, "hub"))
    monkeypatch.setenv("HF_HOME", home)
    same(pinio.load("org/tiny", framework="np"), want)
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("HOME", tmp)
    os.makedirs(os.path.join(tmp, ".cache", "huggingface"))
    os.rename(os.path.join(home, "hub"), os.path.join(tmp, ".cache", "huggingface", "hub"))
    same(pinio.load("org/tiny", framework="np"), want)


def test_safe_open_of_a_cached_file(tmp):
    model, want = hub_tree(tmp)
    path = os.path.join(model, "snapshots", COMMIT, "model-00002-of-00003.safetensors")
    assert os.path.islink(path)
    with safe_open(path, framework="np") as f:
        assert sorted(f.keys()) == ["layers.1.b", "layers.1.w"]
        np.testing.assert_array_equal(f.get_tensor("layers.1.w"), want["layers.1.w"])


def test_a_local_path_wins_and_a_missing_repo_says_where_it_looked(tmp, monkeypatch):
    hub_tree(tmp)
    monkeypatch.setenv("HF_HUB_CACHE", tmp)
    monkeypatch.chdir(tmp)
    os.makedirs("org/tiny")
    stnp.save_file({"local": np.ones(3, np.float32)}, "org/tiny/model.safetensors")
    assert sorted(pinio.load("org/tiny", framework="np")) == ["local"]
    with pytest.raises(pinio.Error, match=r"org/nope: .*hub cache .*models--org--nope"):
        pinio.load("org/nope", framework="np")


def test_a_link_out_of_the_model_folder_is_refused(tmp):
    model, _ = hub_tree(tmp)
    snap = os.path.join(model, "snapshots", COMMIT)
    shard = os.path.join(snap, "model-00002-of-00003.safetensors")
    outside = os.path.join(tmp, "outside.safetensors")
    os.rename(os.path.realpath(shard), outside)
    os.unlink(shard)
    os.symlink(os.path.relpath(outside, snap), shard)
    with pytest.raises(pinio.Error, match="outside the hub model's folder"):
        pinio.load(snap, framework="np")
