"""pinio.integrations.transformers / .diffusers patch() (issue 39), against
contract stand-ins of transformers and diffusers
(engines/standins/{transformers,diffusers}: the modules that bind safe_open
and load_state_dict, and transformers v5's call sequence, recorded from the
engines' files, file@commit in each), not against the engines, which are
not installable here.

Each patch works imported before or after the engine, is idempotent and
counted, undoes on a context manager's exit (every binding back to the
engine's own function), refuses unknown keywords; what it loads is byte
for byte the checkpoint (whole, row and column slices, materialised from
threads after the handles are closed); bad input names the file or key;
each load logs pinio's one line (logger pinio.<engine>: bytes, time to
ready, how)."""
import logging
import os
import sys

import numpy as np
import pytest
import torch

from engines import ready
from pinio.safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.join(HERE, "engines", "standins")
ENGINES = ("transformers", "diffusers")


@pytest.fixture
def engines():
    """The stand-ins importable, and forgotten after (no patch left in force)."""
    import pinio.integrations.diffusers as pd
    import pinio.integrations.transformers as pt

    sys.path.insert(0, STANDINS)
    try:
        yield pt, pd
    finally:
        sys.path.remove(STANDINS)
        left = [m for m in (pt, pd) if m.patched()]
        for name in [n for n in sys.modules if n.split(".")[0] in ENGINES]:
            del sys.modules[name]
        assert not left, f"a patch was left in force: {left}"


def shards(folder):
    rng = np.random.default_rng(11)
    want = {"embed.weight": rng.standard_normal((40, 24)).astype(np.float32),
            "layers.0.q.weight": rng.standard_normal((32, 24)).astype(np.float16),
            "layers.0.o.weight": rng.standard_normal((24, 32)).astype(np.float32),
            "norm.weight": np.arange(24, dtype=np.int64),
            "scale": np.array(0.25, dtype=np.float32)}  # 0-dim: its `[...]` is `[()]`
    a, b = os.path.join(folder, "a.safetensors"), os.path.join(folder, "b.safetensors")
    save_file({k: want[k] for k in ("embed.weight", "layers.0.q.weight")}, a,
              metadata={"format": "pt"})
    save_file({k: want[k] for k in ("layers.0.o.weight", "norm.weight", "scale")}, b,
              metadata={"format": "pt"})
    return [a, b], want


def pinio_safe_open(mu):
    from pinio.safetensors import safe_open

    return isinstance(mu.safe_open, type) and issubclass(mu.safe_open, safe_open)


def check_transformers_load(mu, files, want, is_mps=False):
    plan = {"layers.0.q.weight": (slice(8, 16),), "layers.0.o.weight": (..., slice(8, 16))}
    got = mu._load_pretrained_model(files, is_mps=is_mps, shard_plan=plan)
    assert sorted(got) == sorted(want)
    for k, v in want.items():  # used after every handle's __exit__
        ref = v[plan[k]] if k in plan else v
        assert isinstance(got[k], torch.Tensor)
        assert got[k].numpy().tobytes() == np.ascontiguousarray(ref).tobytes(), k
        assert tuple(got[k].shape) == ref.shape, k


def test_transformers_patched_after_its_import(engines, tmp):
    pt, _ = engines
    files, want = shards(tmp)
    import transformers.modeling_utils as mu

    original = mu.safe_open
    with pt.patch():
        assert pinio_safe_open(mu)
        check_transformers_load(mu, files, want)
        check_transformers_load(mu, files, want, is_mps=True)  # backend="pread"
    assert mu.safe_open is original
    with pytest.raises(ImportError, match="stand-in"):  # the engine's own, unpatched
        mu._load_pretrained_model(files)


def test_transformers_patched_before_its_import(engines, tmp):
    pt, _ = engines
    files, want = shards(tmp)
    h = pt.patch()
    try:
        import transformers.modeling_utils as mu

        assert pinio_safe_open(mu)
        check_transformers_load(mu, files, want)
    finally:
        h.undo()
    assert not pinio_safe_open(mu)


def test_patch_is_idempotent_counted_and_strict(engines, tmp):
    pt, _ = engines
    import transformers.modeling_utils as mu

    original = mu.safe_open
    h1 = pt.patch()
    h2 = pt.patch()
    patched = mu.safe_open
    assert pinio_safe_open(mu)
    with pt.patch():
        pass
    h2.undo()
    h2.undo()  # a handle undoes once
    assert mu.safe_open is patched and pt.patched()
    h1.undo()
    assert mu.safe_open is original and not pt.patched()
    with pytest.raises(TypeError, match="unexpected keyword"):
        pt.patch(backend="pread")


def test_transformers_bad_input_names_the_key_and_the_file(engines, tmp):
    pt, _ = engines
    files, _ = shards(tmp)
    import transformers.modeling_utils as mu

    with pt.patch():
        with mu.safe_open(files[0], framework="pt", device="cpu", backend="mmap") as f:
            with pytest.raises(Exception, match="layers.9.absent"):
                f.get_slice("layers.9.absent")
        cut = os.path.join(tmp, "cut.safetensors")
        with open(files[0], "rb") as f:
            data = f.read()
        with open(cut, "wb") as f:
            f.write(data[:-64])
        with pytest.raises(Exception, match="cut.safetensors"):
            mu._load_pretrained_model([cut])


@pytest.mark.parametrize("order", ["after", "before"])
def test_diffusers_load_state_dict_in_both_bindings(engines, tmp, order):
    _, pd = engines
    files, want = shards(tmp)
    h = pd.patch() if order == "before" else None
    import diffusers.models.model_loading_utils as mlu
    import diffusers.models.modeling_utils as mu

    original = mlu.CALLS
    if h is None:
        h = pd.patch()
    try:
        assert mu.load_state_dict is mlu.load_state_dict
        a = mu.load_model_file(files[0])              # modeling_utils' own binding
        b = mlu._load_shard_file(files[1])             # the defining module's global
        c = mlu.load_state_dict(files[1], disable_mmap=True)
        for got, names in ((a, ["embed.weight", "layers.0.q.weight"]),
                           (b, ["layers.0.o.weight", "norm.weight", "scale"]),
                           (c, ["layers.0.o.weight", "norm.weight", "scale"])):
            assert sorted(got) == names
            for k in names:
                assert got[k].numpy().tobytes() == want[k].tobytes(), k
        d = {"x": torch.ones(2)}
        assert mu.load_state_dict(d) is d              # a dict passes through
        assert mu.load_state_dict(os.path.join(tmp, "w.bin")) == {
            "__diffusers_original__": os.path.join(tmp, "w.bin")}  # other formats: diffusers'
        assert mu.load_state_dict(files[0], map_location="meta") == {
            "__diffusers_original__": files[0]}
        assert len(original) == 2
        with pytest.raises(OSError, match="nope.safetensors"):
            mu.load_model_file(os.path.join(tmp, "nope.safetensors"))
    finally:
        h.undo()
    # undone in both modules: the engine's own function again
    assert mu.load_model_file(files[0]) == {"__diffusers_original__": files[0]}
    assert mlu._load_shard_file(files[0]) == {"__diffusers_original__": files[0]}
    assert not pd.patched()


def ready_lines(caplog, engine, nbytes):
    """pinio's end-of-load lines on logger pinio.<engine>, one per entry of
    `nbytes` ({path: bytes handed out}), each as engines.ready checks it."""
    lines = [ready.of_record(r) for r in caplog.records if r.name == "pinio." + engine]
    got = {}
    for x, (n, how) in zip(lines, ready.check(lines)):
        assert how, x["message"]
        got.setdefault(next(p for p in nbytes if p in x["message"]), []).append(n)
    assert got == {p: [n] for p, n in nbytes.items()}


def test_transformers_logs_one_ready_line_per_handle(engines, tmp, caplog):
    pt, _ = engines
    files, want = shards(tmp)
    import transformers.modeling_utils as mu

    caplog.set_level(logging.INFO, logger="pinio")
    with pt.patch():
        check_transformers_load(mu, files, want)  # the handles closed: each logged
    # what each handle handed out: the plan's slices, the other tensors whole
    a = want["embed.weight"].nbytes + want["layers.0.q.weight"][8:16].nbytes
    b = want["layers.0.o.weight"][:, 8:16].nbytes + want["norm.weight"].nbytes + \
        want["scale"].nbytes
    ready_lines(caplog, "transformers", {files[0]: a, files[1]: b})


def test_diffusers_logs_one_ready_line_per_load(engines, tmp, caplog):
    _, pd = engines
    files, want = shards(tmp)
    import diffusers.models.model_loading_utils as mlu

    caplog.set_level(logging.INFO, logger="pinio")
    with pd.patch():
        a = mlu.load_state_dict(files[0])                      # mapped (or read) in place
        c = mlu.load_state_dict(files[1], disable_mmap=True)   # pinned
    ready_lines(caplog, "diffusers", {
        files[0]: sum(t.numel() * t.element_size() for t in a.values()),
        files[1]: sum(t.numel() * t.element_size() for t in c.values())})
