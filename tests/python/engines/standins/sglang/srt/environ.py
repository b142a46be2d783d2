"""Stand-in of sglang.srt.environ's envs.SGLANG_PLUGINS / SGLANG_PLATFORM
(.get(): the environment variable, or None)."""
import os


class _Var:
    def __init__(self, name):
        self.name = name

    def get(self):
        return os.environ.get(self.name)


class envs:
    SGLANG_PLUGINS = _Var("SGLANG_PLUGINS")
    SGLANG_PLATFORM = _Var("SGLANG_PLATFORM")
