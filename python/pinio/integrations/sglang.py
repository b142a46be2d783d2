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

Because SGLang only logs a plugin's failure, register() logs its own
ERROR line (logger pinio.integrations.sglang) saying that SGLang goes on
with its own iterators, then re-raises."""
import importlib
import inspect
import logging

logger = logging.getLogger(__name__)

WEIGHT_UTILS = "sglang.srt.model_loader.weight_utils"
TARGETS = ("buffered_multi_thread_safetensors_weights_iterator", "safetensors_weights_iterator")


def _show_progress():
    try:
        import torch.distributed as dist

        return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
    except ImportError:
        return True


def _original(name):
    """SGLang's own iterator `name`: the innermost function the hooks
    wrapped (apply_hooks sets each wrapper's __wrapped__)."""
    return inspect.unwrap(getattr(importlib.import_module(WEIGHT_UTILS), name))


def _make(name):
    def iterator(hf_weights_files, *args, **kwargs):
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
        return pinio.weights_iterator(list(hf_weights_files), progress=progress)

    iterator.__name__ = iterator.__qualname__ = f"pinio_{name}"
    return iterator


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
