"""Stand-in of python/sglang/srt/distributed/__init__.py at
e61c708accb766a7224d7a6782119fa1e6531b0f: re-exports parallel_state (the
communication ops and utils it also re-exports are not stood in)."""
from .parallel_state import *  # noqa: F401,F403
