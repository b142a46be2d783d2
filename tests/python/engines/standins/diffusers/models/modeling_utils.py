"""Stand-in of huggingface/diffusers
src/diffusers/models/modeling_utils.py@3782ec4481e12aa0de6d0199285987e2ded36a0e:
it binds load_state_dict (and _load_shard_file) with
`from .model_loading_utils import (...)` and calls its own binding for a
single-file model."""
from .model_loading_utils import _load_shard_file, load_state_dict


def load_model_file(model_file, map_location="cpu"):
    return load_state_dict(model_file, map_location=map_location)
