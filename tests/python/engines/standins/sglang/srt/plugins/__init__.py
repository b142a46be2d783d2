"""Stand-in of python/sglang/srt/plugins/__init__.py at
32c764af5f16beac1afaf71d2d6fcf39a064f304: load_plugins() loads every entry
point of group sglang.srt.plugins (SGLANG_PLUGINS: a comma list of the
names allowed) once per process, calls each with its HookSource set, logs
(does not raise) a plugin's failure, then HookRegistry.apply_hooks().
(SGLANG_PLATFORM's exclusions are left out.)"""
import logging
from importlib.metadata import entry_points

from sglang.srt.environ import envs
from sglang.srt.plugins.hook_registry import HookRegistry, HookSource, _current_plugin_source

logger = logging.getLogger(__name__)
GENERAL_PLUGINS_GROUP = "sglang.srt.plugins"
_plugins_loaded = False


def load_plugins_by_group(group):
    allowed_str = envs.SGLANG_PLUGINS.get()
    allowed = {x.strip() for x in allowed_str.split(",") if x.strip()} if allowed_str else None
    plugins = {}
    for ep in entry_points(group=group):
        if allowed is not None and ep.name not in allowed:
            continue
        try:
            plugins[ep.name] = (ep.load(), ep.dist.name if ep.dist else None)
        except Exception:
            logger.exception("Failed to load plugin %s from group %s", ep.name, group)
    return plugins


def load_plugins():
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for name, (func, dist_name) in load_plugins_by_group(GENERAL_PLUGINS_GROUP).items():
        token = _current_plugin_source.set(HookSource(plugin_name=name, dist_name=dist_name))
        try:
            func()
        except Exception:
            logger.exception("Failed to execute general plugin: %s", name)
        finally:
            _current_plugin_source.reset(token)
    HookRegistry.apply_hooks()
