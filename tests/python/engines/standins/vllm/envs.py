"""Stand-in of vllm/envs.py's VLLM_PLUGINS: None, or the names listed in
$VLLM_PLUGINS (comma separated), read when asked as vLLM's envs are."""
import os


def __getattr__(name):
    if name == "VLLM_PLUGINS":
        v = os.environ.get("VLLM_PLUGINS")
        return None if v is None else v.split(",")
    raise AttributeError(name)
