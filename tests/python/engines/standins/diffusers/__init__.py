"""A contract stand-in for diffusers (tests only; it is not diffusers):
load_state_dict where it is defined and where it is bound (see
models/model_loading_utils.py and models/modeling_utils.py)."""
