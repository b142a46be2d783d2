"""Stand-in of python/sglang/srt/plugins/hook_registry.py at
106f37cea63a70dea91958cb633ccbd87c932d40, REPLACE only: register (a
warning when a target gets a second REPLACE; the source from the context
variable load_plugins sets), apply_hooks (each target once; a failure
logged), the REPLACE wrapper (functools.wraps, __wrapped__ = the original)
and _propagate_patch (every module's binding of the original rewritten)."""
import contextvars
import functools
import logging
import pkgutil
import sys
import types
from collections import defaultdict
from enum import Enum
from typing import NamedTuple

logger = logging.getLogger(__name__)


class HookSource(NamedTuple):
    plugin_name: str
    dist_name: object


_current_plugin_source = contextvars.ContextVar("_current_plugin_source", default=None)


class HookType(Enum):
    BEFORE = "before"
    AFTER = "after"
    AROUND = "around"
    REPLACE = "replace"


class HookRegistry:
    _hooks = defaultdict(list)
    _patched = set()

    @classmethod
    def register(cls, target, hook, hook_type=HookType.AFTER, *, source=None):
        resolved_source = source or _current_plugin_source.get()
        if hook_type == HookType.REPLACE:
            existing = [(h, s) for ht, h, s in cls._hooks[target] if ht == HookType.REPLACE]
            if existing:
                logger.warning("Multiple REPLACE hooks on '%s': previous (%s) will be overridden "
                               "by (%s). The last registered REPLACE takes effect.", target,
                               existing[-1][0], hook)
        cls._hooks[target].append((hook_type, hook, resolved_source))

    @classmethod
    def apply_hooks(cls):
        for target, hooks in sorted(cls._hooks.items()):
            if target in cls._patched:
                continue
            try:
                cls._apply_target(target, hooks)
                cls._patched.add(target)
            except Exception:
                logger.exception("Failed to apply hooks to %s", target)

    @classmethod
    def _apply_target(cls, target, hooks):
        obj_path, attr_name = target.rsplit(".", 1)
        obj = pkgutil.resolve_name(obj_path)
        original = getattr(obj, attr_name)
        wrapped = original
        for hook_type, hook, _src in hooks:
            if hook_type != HookType.REPLACE:
                raise NotImplementedError("the stand-in has REPLACE hooks only")
            wrapped = _wrap_fn(wrapped, hook)
        setattr(obj, attr_name, wrapped)
        if wrapped is not original:
            _propagate_patch(original, wrapped, obj)

    @classmethod
    def reset(cls):
        cls._hooks.clear()
        cls._patched.clear()


def _propagate_patch(original, wrapped, source_module):
    n = 0
    for mod in list(sys.modules.values()):
        if mod is source_module or mod is None or not isinstance(mod, types.ModuleType):
            continue
        for attr_name, attr_value in list(vars(mod).items()):
            if attr_value is original:
                setattr(mod, attr_name, wrapped)
                n += 1
    return n


def _wrap_fn(original_fn, hook):
    @functools.wraps(original_fn)
    def wrapper(*args, **kwargs):
        return hook(*args, **kwargs)

    wrapper.__wrapped__ = original_fn
    return wrapper
