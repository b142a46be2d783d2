"""Stand-in of vllm/distributed/__init__.py: re-exports parallel_state (the
communication ops and utils upstream also re-exports are not stood in)."""
from .parallel_state import *  # noqa: F401,F403
