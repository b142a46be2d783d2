"""A contract stand-in for transformers (tests only; it is not
transformers): the module that binds safe_open and the call sequence of
v5's _load_pretrained_model (see modeling_utils). Proves pinio keeps the
contract as recorded, not that transformers still has it."""
