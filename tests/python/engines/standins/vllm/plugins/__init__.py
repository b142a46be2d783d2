"""Stand-in of vllm/plugins/__init__.py at
a27dcf135bf0db451f1aa5d2dd080852dbde744b: load_general_plugins() loads every
entry point of group vllm.general_plugins (VLLM_PLUGINS: the names allowed)
once per process (plugins_loaded) and calls it; a plugin that fails to load
is logged, not raised."""
import logging

import vllm.envs as envs

logger = logging.getLogger(__name__)

DEFAULT_PLUGINS_GROUP = "vllm.general_plugins"
plugins_loaded = False


def load_plugins_by_group(group):
    from importlib.metadata import entry_points

    allowed_plugins = envs.VLLM_PLUGINS
    discovered_plugins = entry_points(group=group)
    plugins = {}
    for plugin in discovered_plugins:
        if allowed_plugins is None or plugin.name in allowed_plugins:
            try:
                plugins[plugin.name] = plugin.load()
            except Exception:
                logger.exception("Failed to load plugin %s", plugin.name)
    return plugins


def load_general_plugins():
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    for func in load_plugins_by_group(group=DEFAULT_PLUGINS_GROUP).values():
        func()
