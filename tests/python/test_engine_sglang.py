"""pinio as an SGLang plugin (issue 39), against a contract stand-in of
SGLang (engines/standins/sglang: the plugin loader, the hook registry, both
safetensors iterators and a loader that bound them by `from ... import`,
recorded from sgl-project/sglang's files, file@commit in each module), not
against SGLang itself, which is not installable here.

Found the way SGLang finds it: the stand-in's load_plugins reads the
sglang.srt.plugins entry points of pinio installed with pip into a venv
(engines/pipvenv.py); the driver (engines/sglang_driver.py) runs there.
Both iterators, reached through the loader's stale bindings, are pinio's
and give every tensor byte for byte; a decryption key goes to SGLang's own
iterator; loading the plugins again registers nothing twice;
SGLANG_PLUGINS naming another plugin leaves SGLang's iterators; a registry
that refuses the hooks gets pinio's own ERROR line. Under tensor
parallelism (TP 2, two processes of a gloo job set up through the
stand-in's sglang.srt.distributed) the TP group reads the checkpoint once
and every rank still gets every whole tensor byte for byte."""
import os

import numpy as np
import pytest

from engines import ready
from engines.pipvenv import run_driver, run_group, venv  # noqa: F401 (venv: a fixture)
from pinio.safetensors.numpy import save_file


@pytest.fixture
def model(tmp):
    rng = np.random.default_rng(9)
    t = {f"model.layers.{i}.mlp.down_proj.weight": rng.standard_normal((48, 40 + i))
         .astype(np.float32) for i in range(4)}
    t["model.norm.weight"] = np.arange(40, dtype=np.float16)
    files = []
    for s, names in enumerate((sorted(t)[:2], sorted(t)[2:])):
        f = os.path.join(tmp, f"model-{s + 1:05d}-of-00002.safetensors")
        save_file({k: t[k] for k in names}, f)
        files.append(f)
    ref = os.path.join(tmp, "ref.npz")
    np.savez(ref, **t)
    return files, ref, sorted(t)


def drive(venv, ref, env=None, **spec):
    return run_driver(venv, "sglang_driver.py", spec, ref, env)


def ready_lines(out):
    """pinio's end-of-load lines (logger pinio.sglang), as engines.ready checks them."""
    return ready.check([dict(r[3], level=r[1], message=r[2]) for r in out["records"]
                        if r[0] == "pinio.sglang"])


def test_both_iterators_are_pinio_s_through_stale_bindings(venv, model):
    files, ref, names = model
    out = drive(venv, ref, files=files, plugin_loads=2, env={"SGLANG_PLUGINS": "pinio"})
    for mode in ("buffered", "prefetch"):
        run = out["runs"][mode]
        assert (run["names"], run["mismatches"]) == (names, []), run
    # encrypted checkpoints: SGLang's own iterator, the only call it got
    assert out["runs"]["decryption_key"]["names"] == ["__sglang_original__"]
    assert out["original_calls"] == ["safetensors_weights_iterator"]
    warned = [r for r in out["records"] if r[1] in ("WARNING", "ERROR")]
    assert warned == [], warned  # the second load registered nothing twice
    # one line per load pinio made, once its last tensor was handed over
    got = ready_lines(out)
    assert [n for n, _ in got] == [out["runs"][m]["yielded_bytes"] for m in
                                   ("buffered", "prefetch")], out["records"]
    assert all(how for _, how in got), got


def test_another_plugin_named_leaves_sglang_s_iterators(venv, model):
    files, ref, _ = model
    out = drive(venv, ref, files=files, env={"SGLANG_PLUGINS": "someone_else"})
    assert out["runs"]["buffered"]["names"] == ["__sglang_original__"]
    assert out["original_calls"][:2] == ["buffered_multi_thread_safetensors_weights_iterator",
                                         "safetensors_weights_iterator"]


def test_a_failed_registration_is_loud_in_pinio_s_own_line(venv, model):
    files, ref, _ = model
    out = drive(venv, ref, files=files, break_registry=True)
    mine = [r for r in out["records"] if r[0] == "pinio.integrations.sglang"]
    assert len(mine) == 1 and mine[0][1] == "ERROR", out["records"]
    assert "could not replace SGLang's safetensors iterators" in mine[0][2]
    assert "registry gone" in mine[0][2]
    assert out["runs"]["buffered"]["names"] == ["__sglang_original__"]


def test_a_missing_shard_is_named(venv, model):
    files, ref, _ = model
    gone = files[1] + ".gone"
    out = drive(venv, ref, files=[files[0], gone])
    assert "error" in out["runs"]["buffered"] and ".gone" in out["runs"]["buffered"]["error"]


def test_the_tp_group_reads_the_checkpoint_once_each_rank_every_whole_tensor(venv, tmp):
    """TP 2 (gloo, two processes): both iterators give each rank every
    tensor whole (SGLang's weight_loaders narrow by rank themselves), byte
    for byte, dtype and shape; the group's reads of one load sum to about
    the checkpoint once (each rank alone reads it whole:
    PINIO_SGLANG_GROUP_READ=0, the plugin before the group read). cache
    "cold": the file just written is in the page cache, where pinio would
    map it and count nothing read (as the vLLM test measures); PINIO_SHARE=0:
    the ranks are processes of one machine, which would otherwise share
    one read of a file loaded at once (load.h), a saving that depends on
    timing and that a job across machines does not have."""
    rng = np.random.default_rng(11)
    t = {f"model.layers.{i}.{n}.weight": rng.standard_normal((64, 96)).astype(np.float32)
         for i in range(12) for n in ("self_attn.qkv_proj", "mlp.down_proj")}
    t["model.embed_tokens.weight"] = rng.standard_normal((50, 64)).astype(np.float16)
    t["model.norm.weight"] = np.arange(64, dtype=np.float16)
    names = sorted(t)
    files = []
    for s, part in enumerate((names[::2], names[1::2])):
        f = os.path.join(tmp, f"model-{s + 1:05d}-of-00002.safetensors")
        save_file({k: t[k] for k in part}, f)
        files.append(f)
    ref = os.path.join(tmp, "ref.npz")
    np.savez(ref, **t)
    total = sum(v.nbytes for v in t.values())
    # rank 1 names the shards in another order (per-rank staggered order)
    for what, env in (("group", {}), ("alone", {"PINIO_SGLANG_GROUP_READ": "0"})):
        env["PINIO_SHARE"] = "0"
        outs = run_group(venv, "sglang_driver.py", 2, tmp,
                         {"files": files, "cache": "cold", "stagger": True, "env": env}, ref)
        for r, out in enumerate(outs):
            assert out["group_ranks"] == [0, 1]
            assert [x for x in out["records"] if x[1] in ("WARNING", "ERROR")] == [], out
            for mode in ("buffered", "prefetch"):
                run = out["runs"][mode]
                assert "error" not in run, (what, r, mode, run["error"])
                assert run["names"] == names and run["mismatches"] == [], (what, r, mode, run)
                assert run["yielded_bytes"] == total, (what, r, mode, run)
            # each load's line: its bytes; the group's ranks read and
            # were sent the rest (shared), alone each read every byte
            got = ready_lines(out)
            assert [n for n, _ in got] == [total, total], (what, r, got)
            want = {"read", "shared"} if what == "group" else {"read"}
            assert all(how == want for _, how in got), (what, r, got)
        for mode in ("buffered", "prefetch"):
            read = sum(out["runs"][mode]["read_bytes"] for out in outs)
            if what == "group":
                assert total <= read <= 1.1 * total, (mode, read, total)
            else:
                assert read >= 2 * total, (mode, read, total)


def test_group_read_switch_is_checked(venv, model):
    files, ref, _ = model
    out = drive(venv, ref, files=files, env={"PINIO_SGLANG_GROUP_READ": "no"})
    assert out["runs"]["buffered"]["error"].startswith(
        "ValueError: PINIO_SGLANG_GROUP_READ='no': 1 (the TP group reads"), out["runs"]
