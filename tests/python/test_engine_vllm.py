"""pinio as vLLM's load format "pinio" (issue 39), against a contract
stand-in of vLLM (engines/standins/vllm: the loader registry, BaseModelLoader,
the plugin loader, recorded from vllm-project/vllm's files, file@commit in
each module), not against vLLM itself, which is not installable here.

The plugin is found the way vLLM finds it: pinio is installed with
`pip install --no-build-isolation .` into a venv of Debian's python (once
for the session, about a minute; engines/pipvenv.py), and the stand-in's load_general_plugins
reads the installed distribution's vllm.general_plugins entry points; the
driver (engines/vllm_driver.py) runs in that venv, without the build tree.

A toy model with HF-style names and column/row-parallel weight_loaders
(stacked qkv and gate_up, replicated k/v heads at world 4) checks every
parameter byte for byte against plain numpy at tensor-parallel worlds 1, 2
and 4, each rank in turn in one process, and at TP 2 and 4 as that many
processes of a gloo job set up through the stand-in's
vllm.distributed.parallel_state, where the TP group reads the checkpoint
once. Each engine behaviour: a missing tensor, an unknown or ill-typed
extra-config key, registration twice, VLLM_PLUGINS naming another plugin,
a hub repo id (download_dir and the hub cache) and an s3:// model."""
import json
import os

import numpy as np
import pytest

from engines import ready
from engines.pipvenv import run_driver, run_group, venv  # noqa: F401 (venv: a fixture)
from test_hub import COMMIT
from pinio.safetensors.numpy import save_file

H, HEADS, KV_HEADS, HD, INTER, VOCAB = 64, 4, 2, 16, 96, 50


def checkpoint(folder, layers=2, drop=(), seed=5):
    """The toy's checkpoint in two shards with an index, HF names; the
    reference arrays in folder/ref.npz (outside the shards)."""
    rng = np.random.default_rng(seed)
    t = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, H)).astype(np.float16),
         "model.norm.weight": rng.standard_normal(H).astype(np.float16),
         "lm_head.weight": rng.standard_normal((VOCAB, H)).astype(np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for n, rows in (("q_proj", HEADS * HD), ("k_proj", KV_HEADS * HD),
                        ("v_proj", KV_HEADS * HD)):
            t[p + f"self_attn.{n}.weight"] = rng.standard_normal((rows, H)).astype(np.float32)
        t[p + "self_attn.o_proj.weight"] = rng.standard_normal((H, HEADS * HD)).astype(np.float32)
        t[p + "mlp.gate_proj.weight"] = rng.standard_normal((INTER, H)).astype(np.float32)
        t[p + "mlp.up_proj.weight"] = rng.standard_normal((INTER, H)).astype(np.float32)
        t[p + "mlp.down_proj.weight"] = rng.standard_normal((H, INTER)).astype(np.float32)
        t[p + "input_layernorm.weight"] = rng.standard_normal(H).astype(np.float16)
    os.makedirs(folder, exist_ok=True)
    names = sorted(k for k in t if k not in drop)
    wm = {}
    for s, part in enumerate((names[: len(names) // 2], names[len(names) // 2:])):
        f = f"model-{s + 1:05d}-of-00002.safetensors"
        save_file({k: t[k] for k in part}, os.path.join(folder, f))
        wm.update({k: f for k in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    ref = os.path.join(os.path.dirname(folder.rstrip("/")), os.path.basename(folder) + ".npz")
    np.savez(ref, **t)
    return ref


def drive(venv, ref, env=None, **spec):
    return run_driver(venv, "vllm_driver.py", spec, ref, env)


def exact(out, world):
    assert "error" not in out, out["error"]
    assert out["loader"] == "pinio.integrations.vllm.PinioModelLoader"
    assert len(out["ranks"]) == world
    for r in out["ranks"]:
        assert r["params"] == 3 + 5 * 2 and r["mismatches"] == [], out


@pytest.mark.parametrize("world", [1, 2, 4])
def test_the_toy_model_byte_for_byte_at_each_tp_rank(venv, tmp, world):
    folder = os.path.join(tmp, "toy")
    ref = checkpoint(folder)
    # small batches: a layer's tensors are kept across batches before copying
    out = drive(venv, ref, model=folder, world=world, extra={"batch_bytes": 20000})
    exact(out, world)
    assert out["warnings"] == []
    # pinio's end-of-load line, once per load_weights: what it handed over
    got = ready.check(out["ready"])
    assert len(got) == world and sum(n for n, _ in got) == out["yielded_bytes"], got
    assert all(how for _, how in got), got
    bars = out["bars"]  # use_tqdm_on_load: one bar per load, filled and closed
    assert len(bars) == world and all(b["n"] == b["total"] > 0 and b["closed"] for b in bars)
    out = drive(venv, ref, model=folder, world=1, tqdm=False)
    exact(out, 1)
    assert out["bars"] == []


def test_registration_is_idempotent_and_found_by_its_name(venv, tmp):
    folder = os.path.join(tmp, "toy")
    ref = checkpoint(folder)
    out = drive(venv, ref, model=folder, plugin_loads=3, env={"VLLM_PLUGINS": "pinio"})
    exact(out, 1)
    assert not [w for w in out["warnings"] if "already registered" in w], out["warnings"]
    out = drive(venv, ref, model=folder, env={"VLLM_PLUGINS": "someone_else"})
    assert out["loader"] is None
    assert out["error"] == "ValueError: Load format `pinio` is not supported"


def test_a_missing_tensor_is_named(venv, tmp):
    folder = os.path.join(tmp, "toy")
    ref = checkpoint(folder, drop=["model.layers.1.mlp.down_proj.weight"])
    out = drive(venv, ref, model=folder)
    assert out["error"] == ("ValueError: Following weights were not initialized from "
                            "checkpoint: {'model.layers.1.mlp.down_proj.weight'}"), out


def test_extra_config_keys_are_checked(venv, tmp):
    folder = os.path.join(tmp, "toy")
    ref = checkpoint(folder)
    out = drive(venv, ref, model=folder, extra={"num_threads": 8, "batch_bytes": 4096})
    assert out["error"].startswith("ValueError: Unexpected extra config keys for load format "
                                   "pinio: {'num_threads'}"), out
    out = drive(venv, ref, model=folder, extra={"backend": "fast"})
    assert out["error"].startswith("ValueError: model_loader_extra_config['backend'] = "
                                   "'fast'"), out
    exact(drive(venv, ref, model=folder, extra={"backend": "pread", "read_ahead": False}), 1)


def test_a_hub_repo_id_from_download_dir_and_the_cache(venv, tmp):
    cache = os.path.join(tmp, "hub")
    snap = os.path.join(cache, "models--org--toy", "snapshots", COMMIT)
    ref = checkpoint(snap)
    os.makedirs(os.path.join(cache, "models--org--toy", "refs"))
    with open(os.path.join(cache, "models--org--toy", "refs", "main"), "w") as f:
        f.write(COMMIT)
    exact(drive(venv, ref, model="org/toy", download_dir=cache), 1)
    exact(drive(venv, ref, model="org/toy", revision=COMMIT, download_dir=cache), 1)
    exact(drive(venv, ref, model="org/toy", env={"HF_HUB_CACHE": cache}), 1)
    out = drive(venv, ref, model="org/absent", download_dir=cache)
    assert out["error"].startswith("RuntimeError: Cannot find any model weights with "
                                   "`org/absent`"), out


def test_an_s3_model(venv, s3, tmp):
    _, put = s3
    folder = os.path.join(tmp, "toy")
    ref = checkpoint(folder)
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            put("toy/" + name, f.read())
    exact(drive(venv, ref, model="s3://models/toy/", world=2), 2)
    out = drive(venv, ref, model="s3://models/nothing/")
    assert "error" in out and "nothing" in out["error"], out


def drive_group(venv, ref, world, tmp, **spec):
    """Each rank's json line of vllm_driver.py run as `world` processes of a
    gloo job, each loading its own tensor-parallel rank (vLLM's TP group of
    the stand-in's parallel_state)."""
    return run_group(venv, "vllm_driver.py", world, tmp, spec, ref)


def shares(ref, world):
    """Bytes the iterator hands each rank: its slices (q, gate, up by
    rows, o, down by columns, k/v too while the KV heads are at least the
    ranks) and the tensors it takes whole (embeddings, LM head, norms; k/v
    with fewer KV heads than ranks, which the plugin narrows to rank //
    replicas of the heads after the read)."""
    a = np.load(ref)
    whole = sum(v.nbytes for k, v in a.items() if "proj" not in k)
    kv = sum(v.nbytes for k, v in a.items() if "k_proj" in k or "v_proj" in k)
    rest = sum(v.nbytes for k, v in a.items() if "proj" in k) - kv
    return rest // world + (kv // world if world <= KV_HEADS else kv) + whole


@pytest.mark.parametrize("world", [2, 4])
def test_the_tp_group_reads_the_checkpoint_once_each_rank_its_slices(venv, tmp, world):
    """TP world processes (gloo): each rank is handed only its slices of
    the tensors vLLM lets a loader narrow (is_sharded_weight on the
    stand-in's column/row/qkv/merged layers; at world 4 the k/v heads, 2,
    are replicated: rank // 2 of them), the embeddings and LM head whole
    (their padded vocabulary is not torch.chunk's), and every parameter
    byte for byte; the group's reads sum to about the checkpoint once,
    each rank about its share of them. group_read: false: each rank reads
    its slices, less than the whole. slices: false: whole tensors, as
    before. cache "cold": the file just written is in the page cache,
    where pinio would map it and count nothing read."""
    folder = os.path.join(tmp, "toy")
    ref = checkpoint(folder, layers=16)
    total = sum(v.nbytes for v in np.load(ref).values())
    share = shares(ref, world)
    base = dict(model=folder, layers=16)
    runs = {"group": {"batch_bytes": 500_000, "cache": "cold"},
            "alone": {"batch_bytes": 500_000, "cache": "cold", "group_read": False},
            "whole": {"batch_bytes": 500_000, "cache": "cold", "slices": False}}
    got = {}
    for what, extra in runs.items():
        outs = drive_group(venv, ref, world, tmp, extra=extra, **base)
        for r, out in enumerate(outs):
            assert "error" not in out, out["error"]
            assert out["group_ranks"] == list(range(world))
            assert out["ranks"] == [{"params": 3 + 5 * 16, "mismatches": []}], (what, r, out)
        got[what] = outs
    for what, outs in got.items():  # each rank's line: its bytes, and how they came
        for out in outs:
            lines = ready.check(out["ready"])
            assert [n for n, _ in lines] == [out["yielded_bytes"]], (what, lines)
            # a group's rank is sent what others read; alone, a rank reads (or
            # maps another process's read of the same file: node-local sharing)
            how = lines[0][1]
            assert ("shared" in how) if what != "alone" else (how and "mapped" not in how), \
                (what, lines)
    for out in got["group"] + got["alone"]:
        assert out["yielded_bytes"] == share, (out["yielded_bytes"], share, total)
    for out in got["whole"]:
        assert out["yielded_bytes"] == total
    for what in ("group", "whole"):
        read = sum(out["read_bytes"] for out in got[what])
        assert total <= read <= 1.1 * total, (what, read, total)
    for out in got["group"]:  # the owners' stripes, balanced by bytes
        assert out["read_bytes"] <= 1.1 * total / world + 64 * 1024, (out["read_bytes"], total)
    for out in got["alone"]:
        # its slices and less than the whole; not about its share: alone, a
        # rank reads whole 4 KiB blocks, which on this toy's 8-24 KiB
        # tensors cover much of the next rank's slices, and o/down's
        # column runs (128-192 bytes) are read through whole (measured
        # 61-85 % of the checkpoint a rank); the group exchanges those
        assert share <= out["read_bytes"] < total, (out["read_bytes"], share, total)


def test_group_read_is_a_bool(venv, tmp):
    folder = os.path.join(tmp, "toy")
    ref = checkpoint(folder)
    out = drive(venv, ref, model=folder, extra={"group_read": "no"})
    assert out["error"].startswith("ValueError: model_loader_extra_config['group_read'] = "
                                   "'no'"), out
    out = drive(venv, ref, model=folder, extra={"slices": 1})
    assert out["error"].startswith("ValueError: model_loader_extra_config['slices'] = 1"), out
    exact(drive(venv, ref, model=folder, extra={"group_read": False, "slices": False}), 1)
