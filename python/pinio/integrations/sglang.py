"""pinio under SGLang: its safetensors iterators replaced by pinio's.

SGLang's LoadFormat is closed (no "pinio" format), so the installed pinio
has an entry point of group sglang.srt.plugins named "pinio"
(SGLANG_PLUGINS=pinio selects it), which SGLang calls in each of its
processes; register() then REPLACEs, through SGLang's HookRegistry (whose
apply_hooks also rewrites every module's stale `from weight_utils import
...` binding), both iterators SGLang reads safetensors with:
buffered_multi_thread_safetensors_weights_iterator (the default since
sglang #20289) and safetensors_weights_iterator (with prefetch). Their
arguments drift between releases, so the replacement takes
fn(hf_weights_files, *args, **kwargs) and reads the files whole, every
tensor, through pinio.weights_iterator; a decryption_key (encrypted
checkpoints) goes to SGLang's own iterator.

Under tensor parallelism (SGLang's TP group, resolved when the iterator is
called, larger than 1) the TP group reads the checkpoint once:
process_group= is the group's gloo cpu_group (never its device group,
NCCL on a GPU job, which does not take host tensors), each tensor is read
by one rank and exchanged, and every rank still gets every whole tensor,
as SGLang's iterator contract has it (its weight_loaders narrow by rank
themselves). The files are sorted first: a group's ranks must plan the
same batches, and SGLang may hand each rank its files in an order of its
own (sglang #26937). Every rank of the group must consume the iterator to
the end, as SGLang's models do. PINIO_SGLANG_GROUP_READ=0 makes each rank
read the whole checkpoint itself, as before.

The contract mirrored, from sgl-project/sglang:
  python/sglang/srt/plugins/__init__.py@32c764af5f16beac1afaf71d2d6fcf39a064f304
      load_plugins: every entry point of the group, once per process, in
      every process; a plugin's exception is logged, not raised; then
      HookRegistry.apply_hooks().
  python/sglang/srt/plugins/hook_registry.py@106f37cea63a70dea91958cb633ccbd87c932d40
      HookRegistry.register(target, hook, HookType.REPLACE) (a second
      REPLACE of a target logs a warning); apply_hooks wraps the original
      (wrapper.__wrapped__ is it) and _propagate_patch rewrites stale
      bindings.
  python/sglang/srt/model_loader/weight_utils.py@57003beaaa7b23e3a29a045eeb72e329936a9ce8
      safetensors_weights_iterator(hf_weights_files, is_all_weights_sharded=False)
      yielding (name, tensor); later releases add decryption_key,
      disable_mmap and the buffered iterator (hf_weights_files, max_workers,
      disable_mmap=False, ...), as recorded in the design note engines.md.
  python/sglang/srt/distributed/parallel_state.py@0005973a84f7a02787e270b6be5970d3022d07fe
      get_tp_group() (get_tensor_model_parallel_group is its alias) ->
      GroupCoordinator (.cpu_group: gloo, .world_size, .rank_in_group);
      model_parallel_is_initialized() says whether it is set up.
      (python/sglang/srt/distributed/__init__.py@e61c708accb766a7224d7a6782119fa1e6531b0f
      re-exports it.)

Because SGLang only logs a plugin's failure, register() logs its own
ERROR line (logger pinio.integrations.sglang) saying that SGLang goes on
with its own iterators, then re-raises."""
import importlib
import inspect
import logging
import os
import time

from . import _log

logger = logging.getLogger(__name__)

WEIGHT_UTILS = "sglang.srt.model_loader.weight_utils"
TARGETS = ("buffered_multi_thread_safetensors_weights_iterator", "safetensors_weights_iterator")


def _show_progress():
    try:
        import torch.distributed as dist

        return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
    except ImportError:
        return True


def _tp_group():
    """SGLang's TP GroupCoordinator when it has more than one rank and the
    group read is not turned off, else None."""
    on = os.environ.get("PINIO_SGLANG_GROUP_READ", "1")
    if on not in ("0", "1"):
        raise ValueError(f"PINIO_SGLANG_GROUP_READ={on!r}: 1 (the TP group reads the "
                         "checkpoint once, the default) or 0 (each rank reads it whole)")
    if on == "0":
        return None
    from sglang.srt.distributed import parallel_state as ps

    if not ps.model_parallel_is_initialized():
        return None
    tp = ps.get_tp_group()
    return tp if tp.world_size > 1 else None


def _original(name):
    """SGLang's own iterator `name`: the innermost function the hooks
    wrapped (apply_hooks sets each wrapper's __wrapped__)."""
    return inspect.unwrap(getattr(importlib.import_module(WEIGHT_UTILS), name))


def _make(name):
    def iterator(hf_weights_files, *args, **kwargs):
        t_call = time.perf_counter()
        if kwargs.get("decryption_key"):
            return _original(name)(hf_weights_files, *args, **kwargs)
        import pinio

        progress = False
        if _show_progress():
            try:
                import tqdm  # noqa: F401 (SGLang has it; pinio draws its bar)

                progress = True
            except ImportError:
                progress = False
        files, kw = list(hf_weights_files), {}
        tp = _tp_group()
        if tp is not None:
            files, kw = sorted(files), {"process_group": tp.cpu_group}
        return _logged(pinio.weights_iterator(files, progress=progress, **kw), t_call)

    iterator.__name__ = iterator.__qualname__ = f"pinio_{name}"
    return iterator


def _logged(it, t_call):
    """`it`'s (name, tensor) pairs, then pinio's line (pinio.integrations._log)
    once the last was handed over; closed early, it closes `it` and logs
    nothing (no load ended)."""
    with it:
        yield from it
    rep = it.report()
    _log.ready("sglang", _log.files(rep["files"]), rep["yielded_bytes"], t_call, rep["how"],
               rep["io_seconds"])


HOOKS = {name: _make(name) for name in TARGETS}


def register():
    """The sglang.srt.plugins entry point: REPLACE hooks on both iterators.
    Idempotent: a hook already registered is not registered again (SGLang
    would warn of a second REPLACE)."""
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        hooks = getattr(HookRegistry, "_hooks", {})
        for name, fn in HOOKS.items():
            target = f"{WEIGHT_UTILS}.{name}"
            if any(h is fn for _, h, *_ in hooks.get(target, ())):
                continue
            HookRegistry.register(target, fn, HookType.REPLACE)
    except Exception as e:
        logger.error("pinio: the SGLang plugin could not replace SGLang's safetensors "
                     "iterators (%s: %s); SGLang goes on with its own loaders",
                     type(e).__name__, e)
        raise
