"""Stand-in of huggingface/diffusers
src/diffusers/models/model_loading_utils.py@771d7f110523d18a0c8b879256f9fe02debc1a02:
load_state_dict(checkpoint_file, dduf_entries=None, disable_mmap=False,
map_location="cpu") passes a dict through and reads files otherwise;
_load_shard_file calls it through this module's global. Upstream
safetensors is not installed here, so reading a file is recorded in CALLS
and answered with a marker dict (an unpatched load is seen)."""
CALLS = []


def load_state_dict(checkpoint_file, dduf_entries=None, disable_mmap=False, map_location="cpu"):
    if isinstance(checkpoint_file, dict):
        return checkpoint_file
    CALLS.append((str(checkpoint_file), dduf_entries, disable_mmap, str(map_location)))
    return {"__diffusers_original__": str(checkpoint_file)}


def _load_shard_file(shard_file, dduf_entries=None):
    return load_state_dict(shard_file, dduf_entries=dduf_entries)
