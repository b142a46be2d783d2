"""pinio under transformers' from_pretrained: patch() replaces the
`safe_open` that transformers.modeling_utils binds (and any other module of
transformers bound to the same function) with pinio.safetensors.safe_open.

    import pinio.integrations.transformers as pt
    pt.patch()                        # before or after `import transformers`
    with pt.patch():                  # or only for a block: undone on exit
        model = AutoModelForCausalLM.from_pretrained("org/model")

transformers has no loader registry, hence the patch. The contract kept,
from huggingface/transformers src/transformers/modeling_utils.py:
`from safetensors import safe_open` at module level (as at
040ba146759afc625c77f49d04982bb54873995f); v5's _load_pretrained_model
calls safe_open(file, framework="pt", device=device, backend="mmap" or
"pread"), adds the handle to a set (hashable), takes get_slice(k) of every
key first, materialises them from a thread pool with `[...]` or tuples of
slices, then calls __exit__(None, None, None) on each handle; tensors stay
valid after it. (The v5 call sequence as recorded in the design note
engines.md §1.3 and read from the index's copy; its commit is not recorded
there.) pinio.safetensors.safe_open keeps each of these but `[...]`,
which its slices refuse: the handle here hands out slices that spell an
Ellipsis as the full slices it stands for. get_slice of an absent key
raises naming it."""
from ._patch import Handle, Patch


def _expand(index, ndim):
    """`index` with its Ellipsis (at most one, as numpy allows) spelled as
    the full slices it stands for; a 0-dim tensor's `[...]` is `[()]`."""
    if index is Ellipsis:
        return tuple(slice(None) for _ in range(ndim))
    if not isinstance(index, tuple) or not any(i is Ellipsis for i in index):
        return index
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    at = next(k for k, i in enumerate(index) if i is Ellipsis)
    fill = tuple(slice(None) for _ in range(ndim - (len(index) - 1)))
    return index[:at] + fill + index[at + 1:]


class _Slice:
    """A pinio slice that also takes `...`."""

    __slots__ = ("_s",)

    def __init__(self, s):
        self._s = s

    def __getitem__(self, index):
        return self._s[_expand(index, len(self._s.get_shape()))]

    def __getattr__(self, name):
        return getattr(self._s, name)


def _replacement(original):
    from pinio.safetensors import safe_open as pinio_safe_open

    class safe_open(pinio_safe_open):
        """pinio.safetensors.safe_open whose slices take `[...]`."""

        def get_slice(self, name):
            return _Slice(super().get_slice(name))

    return safe_open


_PATCH = Patch("transformers.modeling_utils", "safe_open", "transformers", _replacement)


def patch():
    """Replaces transformers' safe_open with pinio's (idempotent; counted).
    Returns a handle: handle.undo(), or `with patch():` to undo on exit."""
    return Handle([_PATCH])


def patched():
    """Whether a patch() is in force."""
    return _PATCH.active
