"""pinio under diffusers' from_pretrained: patch() replaces
load_state_dict in diffusers.models.model_loading_utils, which defines it
(its _load_shard_file calls it), and in every diffusers module that bound
it (diffusers.models.modeling_utils does `from .model_loading_utils import
load_state_dict`), with one that reads .safetensors files through pinio.

    import pinio.integrations.diffusers as pd
    with pd.patch():                  # before or after `import diffusers`
        unet = UNet2DConditionModel.from_pretrained("org/model", subfolder="unet")

The contract kept, from huggingface/diffusers:
src/diffusers/models/model_loading_utils.py@771d7f110523d18a0c8b879256f9fe02debc1a02
    load_state_dict(checkpoint_file, dduf_entries=None, disable_mmap=False,
    map_location="cpu"): a dict is passed through; a .safetensors file
    becomes {name: tensor} on map_location; DDUF entries, GGUF and torch
    pickles are read otherwise.
src/diffusers/models/modeling_utils.py@3782ec4481e12aa0de6d0199285987e2ded36a0e
    binds load_state_dict with `from .model_loading_utils import (...)`.
pinio takes the .safetensors files on the CPU or a CUDA device
(disable_mmap=True: into pinned memory, no mapping); everything else
(dicts, DDUF entries, other formats, map_location="meta") goes to
diffusers' own function. Each load pinio takes logs pinio's line
(pinio.integrations._log, logger pinio.diffusers)."""
import os
import time

from . import _log
from ._patch import Handle, Patch


def _replacement(original):
    import pinio
    from pinio.safetensors import _load_whole
    from pinio.safetensors.torch import load_file

    def load_state_dict(checkpoint_file, dduf_entries=None, disable_mmap=False,
                        map_location="cpu", *args, **kwargs):
        loc = str(map_location)
        if (args or kwargs or dduf_entries or isinstance(checkpoint_file, dict)
                or not os.fspath(checkpoint_file).endswith(".safetensors")
                or not (loc == "cpu" or loc.startswith("cuda"))):
            return original(checkpoint_file, dduf_entries, disable_mmap, map_location,
                            *args, **kwargs)
        t_call, path, rep = time.perf_counter(), os.fspath(checkpoint_file), {}
        if disable_mmap and loc == "cpu":
            with pinio.open(path, memory="pinned") as ck:  # pinio.load(), its report kept
                out = ck.tensors()
                rep = ck.report()
        elif loc == "cpu":
            out = _load_whole(path, "pt", report=rep)  # load_file's CPU path
        else:
            out = load_file(path, device=loc)
        # a stream to the device reads every byte it copies
        how = pinio._how_text(pinio._how(rep)) if rep else "read"
        _log.ready("diffusers", path, sum(_log.nbytes(t) for t in out.values()), t_call, how,
                   rep.get("io_seconds", 0.0))
        return out

    load_state_dict.__wrapped__ = original
    return load_state_dict


_PATCH = Patch("diffusers.models.model_loading_utils", "load_state_dict", "diffusers",
               _replacement)


def patch():
    """Replaces diffusers' load_state_dict with pinio's (idempotent;
    counted). Returns a handle: handle.undo(), or `with patch():`."""
    return Handle([_PATCH])


def patched():
    """Whether a patch() is in force."""
    return _PATCH.active
