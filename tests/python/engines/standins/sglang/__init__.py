"""A contract stand-in for SGLang (tests only; it is not SGLang): the plugin
loader, the hook registry and the two safetensors iterators with a loader
that bound them by `from ... import`, recorded from sgl-project/sglang's
files (file@commit in each module). Proves pinio keeps the contract as
recorded, not that SGLang still has it."""
