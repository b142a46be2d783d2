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
raises naming it.

Each handle logs pinio's line (pinio.integrations._log, logger
pinio.transformers) when it is closed: the bytes of the tensors and slices
it handed out, ready from safe_open() until that close (transformers
closes each handle once every slice of it was made)."""
import threading
import time

from . import _log
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
    """A pinio slice that also takes `...`, counted by its handle."""

    __slots__ = ("_s", "_f")

    def __init__(self, s, f):
        self._s, self._f = s, f

    def __getitem__(self, index):
        return self._f._handed(self._s[_expand(index, len(self._s.get_shape()))])

    def __getattr__(self, name):
        return getattr(self._s, name)


def _replacement(original):
    from pinio.safetensors import safe_open as pinio_safe_open

    class safe_open(pinio_safe_open):
        """pinio.safetensors.safe_open whose slices take `[...]`, logging
        pinio's line at close()."""

        def __init__(self, filename, *args, **kwargs):
            self._pinio_t_call = time.perf_counter()
            self._pinio_name = str(filename)  # a path or an object's URL
            self._pinio_lock = threading.Lock()  # transformers slices from a thread pool
            self._pinio_bytes = 0  # handed out: tensors and slices
            self._pinio_logged = False
            super().__init__(filename, *args, **kwargs)

        def _handed(self, t):
            with self._pinio_lock:
                self._pinio_bytes += _log.nbytes(t)
            return t

        def get_tensor(self, name):
            return self._handed(super().get_tensor(name))

        def get_slice(self, name):
            return _Slice(super().get_slice(name), self)

        def close(self):
            super().close()
            with self._pinio_lock:
                logged, self._pinio_logged = self._pinio_logged, True
            if not logged:
                _log.ready("transformers", self._pinio_name, self._pinio_bytes,
                           self._pinio_t_call, self.pinio_how)

    return safe_open


_PATCH = Patch("transformers.modeling_utils", "safe_open", "transformers", _replacement)


def patch():
    """Replaces transformers' safe_open with pinio's (idempotent; counted).
    Returns a handle: handle.undo(), or `with patch():` to undo on exit."""
    return Handle([_PATCH])


def patched():
    """Whether a patch() is in force."""
    return _PATCH.active
