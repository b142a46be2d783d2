"""One function of an engine's module replaced by pinio's, for engines with
no loader registry (transformers, diffusers).

Why the import hook: patch() may run before the engine is imported, and
the engine's own modules bind the function with `from X import f` while
they import; the module that defines (or binds) it is patched the moment
it has executed, before any later module copies the binding. Why the
scan of the engine's modules: modules imported before patch() hold their
own binding of the original, which a plain setattr would leave behind.

Counted: patch() twice is patched once, and it is undone when every
patch() has been undone (a plain patch() outlives a `with patch():`)."""
import importlib.abc
import sys
import threading


class _Loader(importlib.abc.Loader):
    """The engine module's own loader, and the patch once it has run."""

    def __init__(self, loader, after):
        self._loader, self._after = loader, after

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._after(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, patch):
        self._patch = patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self._patch.module:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self._patch._rewrite)
                return spec
        return None


class Patch:
    """`attr` of module `module` (and every module of `package` that bound
    it) replaced by make(original)."""

    def __init__(self, module, attr, package, make):
        self.module, self.attr, self.package, self._make = module, attr, package, make
        self._count = 0
        self._lock = threading.Lock()
        self._finder = None
        self.original = self.replacement = None

    def _bound(self):
        for name, m in list(sys.modules.items()):
            if m is not None and (name == self.package or name.startswith(self.package + ".")):
                yield m

    def _rewrite(self, defining):
        if self.replacement is None:
            self.original = getattr(defining, self.attr)
            self.replacement = self._make(self.original)
        for m in self._bound():
            if m.__dict__.get(self.attr) is self.original:
                setattr(m, self.attr, self.replacement)
        if defining.__dict__.get(self.attr) is self.original:
            setattr(defining, self.attr, self.replacement)

    def apply(self):
        with self._lock:
            self._count += 1
            if self._count > 1:
                return
            self._finder = _Finder(self)
            sys.meta_path.insert(0, self._finder)
            mod = sys.modules.get(self.module)
            if mod is not None:
                self._rewrite(mod)

    def undo(self):
        with self._lock:
            if self._count == 0:
                return
            self._count -= 1
            if self._count:
                return
            if self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None
            if self.replacement is not None:
                for m in self._bound():
                    if m.__dict__.get(self.attr) is self.replacement:
                        setattr(m, self.attr, self.original)
            self.original = self.replacement = None

    @property
    def active(self):
        return self._count > 0


class Handle:
    """What patch() returns: undo() (once), or a context manager that undoes
    on exit."""

    def __init__(self, patches):
        self._patches = patches
        self._done = False
        for p in patches:
            p.apply()

    def undo(self):
        if not self._done:
            self._done = True
            for p in self._patches:
                p.undo()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()
        return False
