"""Load format "pinio" for vLLM: `vllm serve MODEL --load-format pinio`.

vLLM finds it by itself: the installed pinio has an entry point of group
vllm.general_plugins named "pinio" (VLLM_PLUGINS=pinio selects it), which
vLLM calls in every process it starts; register() then registers
PinioModelLoader with vLLM's register_model_loader. Nothing here imports
vllm until register() or loader_class() runs.

The contract mirrored, from vllm-project/vllm:
  vllm/plugins/__init__.py@a27dcf135bf0db451f1aa5d2dd080852dbde744b
      load_general_plugins: every entry point of the group, once per
      process, in every process: register() must be idempotent.
  vllm/model_executor/model_loader/__init__.py@e9234694f494887ddbeafed08095a1dfa5745369
      register_model_loader(fmt)(cls): ValueError unless a BaseModelLoader
      subclass, a warning when it overwrites; get_model_loader: cls(load_config).
  vllm/model_executor/model_loader/base_loader.py@7679f4d267e47fdd3cc1450b62a7dc7604c380d1
      BaseModelLoader(load_config); abstract download_model(model_config)
      and load_weights(model, model_config); load_model (inherited, kept)
      builds the model and calls load_weights.
  vllm/model_executor/model_loader/default_loader.py@0e06f49835a66b11f2b74410d30b1f88575ee527
      unknown model_loader_extra_config keys raise ValueError in __init__;
      the "Following weights were not initialized from checkpoint" check
      lives in DefaultModelLoader.load_weights, not the base class, so this
      loader makes it itself; "Cannot find any model weights" when none.
  vllm/distributed/parallel_state.py@0c175ae9295b575078961a68c4d3a2a838dce5ef
      get_tp_group() -> GroupCoordinator (.cpu_group: gloo, .world_size,
      .rank_in_group), set up before the model is loaded;
      model_parallel_is_initialized() says whether it is.
  vllm/model_executor/layers/linear.py@0036d38de46c5d48fdedeb658dedc0fc0f95677d
      the v1 weight_loaders of ColumnParallelLinear (output_dim),
      MergedColumnParallelLinear (each of output_sizes), QKVParallelLinear
      (q by tp_rank, k/v by tp_rank // num_kv_head_replicas) and
      RowParallelLinear (input_dim) narrow the tensor by rank unless
      param.is_sharded_weight; the offsets into a stacked parameter stay.
  vllm/model_executor/parameter.py@0045689bdb239a1c53951f3847b9475098f36ef7
      BasevLLMParameter's load_*_weight (weight_loader_v2) narrow by
      tp_rank whatever is_sharded_weight says: such parameters get whole
      tensors.
  vllm/model_executor/layers/vocab_parallel_embedding.py@00db0119c37674b956dec4228d4e571549020976
      embeddings and the LM head shard a padded vocabulary: whole tensors.

What it does: download_model resolves the model offline (a local folder,
a hub repo id in load_config.download_dir or the hub cache, an s3://, gs:// or az:// URL)
and downloads nothing; load_weights calls model.load_weights() once with
pinio.weights_iterator(...) over the safetensors files, read in batches
freed as the model copies them. Under tensor parallelism (vLLM's TP group
larger than 1, TP rank r of n) each rank is handed only its slice of the
tensors whose narrowing vLLM lets a loader do (slice_plan()): a tensor
feeding a column- or row-parallel parameter with a v1 weight_loader is
read as torch.chunk(t, n, dim)[r] (the dimension vLLM narrows, sizes
checked against the parameter), k/v whose heads are fewer than the
ranks are narrowed to rank r // num_kv_head_replicas of the heads here,
and those parameters are marked is_sharded_weight for the load (the mark
is taken off after), so their weight_loaders take the slice as it is.
Every other tensor is whole (embeddings, LM head, norms, fused-on-disk
weights, vLLM's BasevLLMParameters, layers whose tp rank is not the TP
group's, anything the model does not describe): whole is always correct.
The TP group reads the checkpoint once: process_group= is the TP group's
gloo cpu_group; each rank reads its own contiguous slices, and the other
tensors are read once by one rank and exchanged. Extra config:
group_read false (each rank reads its slices and every whole tensor
itself), slices false (whole tensors, narrowed by the weight_loaders).
model_loader_extra_config takes the keys of EXTRA_CONFIG."""
import fnmatch
import glob
import os
import time

from . import _log

LOAD_FORMAT = "pinio"

# model_loader_extra_config keys: name -> (check, what it must be)
EXTRA_CONFIG = {
    "batch_bytes": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
                    "a positive int (bytes read per batch)"),
    "read_ahead": (lambda v: isinstance(v, bool), "a bool"),
    "backend": (lambda v: v in ("auto", "fixed_direct", "direct", "buffered", "pread"),
                "auto, fixed_direct, direct, buffered or pread"),
    "cache": (lambda v: v in ("auto", "cold", "hot"), "auto, cold or hot"),
    "direct": (lambda v: v in ("auto", "on", "off"), "auto, on or off"),
    "memory": (lambda v: v in ("auto", "pinned", "mapped"), "auto, pinned or mapped"),
    "group_read": (lambda v: isinstance(v, bool),
                   "a bool (false: each tensor-parallel rank reads its slices and every "
                   "whole tensor itself)"),
    "slices": (lambda v: isinstance(v, bool),
               "a bool (false: whole tensors, which the weight_loaders narrow)"),
}

_cls = None
_registered = False


def check_extra_config(load_format, extra):
    """ValueError naming the unknown keys (as vLLM's own loaders word it) or
    the key whose value is wrong; the keywords for weights_iterator."""
    extra = dict(extra or {})
    unexpected = set(extra) - set(EXTRA_CONFIG)
    if unexpected:
        raise ValueError(f"Unexpected extra config keys for load format {load_format}: "
                         f"{unexpected} (pinio takes {', '.join(sorted(EXTRA_CONFIG))})")
    for k, v in extra.items():
        ok, what = EXTRA_CONFIG[k]
        if not ok(v):
            raise ValueError(f"model_loader_extra_config[{k!r}] = {v!r}: {what}")
    return extra


def _snapshot(cache, repo, revision):
    """The snapshot folder of `repo` in the hub cache `cache` (as
    huggingface_hub lays it out), or None."""
    folder = os.path.join(cache, "models--" + repo.replace("/", "--"))
    rev = revision or "main"
    ref = os.path.join(folder, "refs", rev)
    if os.path.isfile(ref):
        with open(ref) as f:
            rev = f.read().strip()
    snap = os.path.join(folder, "snapshots", rev)
    return snap if os.path.isdir(snap) else None


def resolve(model, revision=None, download_dir=None, ignore_patterns=None):
    """What pinio reads for vLLM's model_config.model: a local folder (its
    index when it has one, else its *.safetensors less ignore_patterns), a
    hub repo id from download_dir or the hub cache (offline: nothing is
    downloaded) or an object URL (s3://, gs://, az://, https://ACCOUNT.
    blob.core.windows.net/), which takes no revision. RuntimeError when
    there are no weights."""
    from pinio.safetensors._object import is_url

    # before the hub's rules: a URL is no folder, and "URL@REV" no object
    if is_url(model):
        return model
    folder = model if os.path.isdir(model) else None
    if folder is None and download_dir:
        folder = _snapshot(download_dir, model, revision)
        if folder is None:
            raise RuntimeError(f"Cannot find any model weights with `{model}`: no snapshot "
                               f"{revision or 'main'} of it in download_dir {download_dir} "
                               "(pinio reads the hub cache offline; download it first)")
    if folder is None:
        # a repo id: pinio resolves it in the hub cache (HF_HUB_CACHE, HF_HOME)
        return f"{model}@{revision}" if revision else model
    if os.path.isfile(os.path.join(folder, "model.safetensors.index.json")):
        return folder
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    for pat in ignore_patterns or ():
        files = [f for f in files if not fnmatch.fnmatch(os.path.relpath(f, folder), pat)]
    if not files:
        raise RuntimeError(f"Cannot find any model weights with `{model}` (no *.safetensors "
                           f"in {folder})")
    return files


def _show_progress(use_tqdm_on_load):
    """vLLM's rule (weight_utils.enable_tqdm): a bar on the first rank only."""
    if not use_tqdm_on_load:
        return False
    try:
        import torch.distributed as dist

        return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
    except ImportError:
        return True


def _tp_group():
    """vLLM's TP GroupCoordinator when it has more than one rank, else None."""
    from vllm.distributed import parallel_state as ps

    if not ps.model_parallel_is_initialized():
        return None
    tp = ps.get_tp_group()
    return tp if tp.world_size > 1 else None


# the layers whose v1 weight_loader honours is_sharded_weight, most
# derived first; VocabParallelEmbedding (and ParallelLMHead) keep whole
_KINDS = ("VocabParallelEmbedding", "QKVParallelLinear", "MergedColumnParallelLinear",
          "RowParallelLinear", "ColumnParallelLinear")


def _kind(param):
    """(layer kind, layer) whose v1 weight_loader `param` has, else (None, None)."""
    if hasattr(param, "load_column_parallel_weight"):
        return None, None  # a BasevLLMParameter: narrows whatever is_sharded_weight says
    layer = getattr(getattr(param, "weight_loader", None), "__self__", None)
    names = {c.__name__ for c in type(layer).__mro__} if layer is not None else set()
    return next(((k, layer) for k in _KINDS if k in names), (None, None))


def _sources(params, packed, names):
    """{parameter name: [(checkpoint name, index in its packed list or None)]}."""
    out = {}
    for name in names:
        if name in params:
            out.setdefault(name, []).append((name, None))
            continue
        parts = name.split(".")
        for i, part in enumerate(parts):
            hit = next(((fused, subs.index(part)) for fused, subs in packed.items()
                        if part in subs), None)
            if hit is not None:
                pn = ".".join(parts[:i] + [hit[0]] + parts[i + 1:])
                if pn in params:
                    out.setdefault(pn, []).append((name, hit[1]))
                break
    return out


def _cut(kind, layer, param, idx, shape, rank, world):
    """How checkpoint tensor of `shape` feeding `param` at packed index
    `idx` reaches rank `rank` of `world` as vLLM's weight_loader would
    narrow it: ("chunk", dim) (torch.chunk(t, world, dim)[rank]), ("narrow",
    dim, start, size) (read whole, narrowed here), or None (whole)."""
    if kind == "RowParallelLinear":
        dim = getattr(param, "input_dim", None)
        if dim is None or idx is not None or len(shape) != param.dim():
            return None
        return ("chunk", dim) if shape[dim] == param.shape[dim] * world else None
    dim = getattr(param, "output_dim", None)
    if dim is None or len(shape) != param.dim():
        return None
    if kind == "ColumnParallelLinear":
        size = param.shape[dim] if idx is None else None
    elif kind == "MergedColumnParallelLinear":
        size = layer.output_sizes[idx] // world if isinstance(idx, int) else None
    else:  # QKVParallelLinear: packed [q, k, v]
        if idx not in (0, 1, 2):
            return None
        heads = layer.num_heads if idx == 0 else layer.num_kv_heads
        # v's heads may be of another size (v_head_size, where vLLM has it)
        size = heads * (getattr(layer, "v_head_size", layer.head_size) if idx == 2
                        else layer.head_size)
        reps = 1 if idx == 0 else layer.num_kv_head_replicas
        if reps > 1:  # k/v heads fewer than the ranks: rank // replicas of them
            if shape[dim] * reps != size * world or world % reps:
                return None
            return ("narrow", dim, rank // reps * size, size)
    if size is None or shape[dim] != size * world:
        return None
    return ("chunk", dim)


def slice_plan(model, headers, rank, world):
    """What rank `rank` of `world` reads of the checkpoint `headers`
    ({name: (dtype, shape)}): (split rules for weights_iterator, {name:
    (dim, start, size)} narrowed after the read, [parameters to mark
    is_sharded_weight]). A parameter is sliced only when every checkpoint
    tensor feeding it can be (see the module's text); otherwise all of
    them are whole, and its weight_loader narrows them as usual."""
    params = dict(model.named_parameters())
    packed = getattr(model, "packed_modules_mapping", None) or {}
    rules, narrow, marked = [], {}, []
    for pn, srcs in _sources(params, packed, headers).items():
        param = params[pn]
        kind, layer = _kind(param)
        if kind in (None, "VocabParallelEmbedding") or getattr(param, "is_sharded_weight", False) \
                or getattr(layer, "tp_size", None) != world \
                or getattr(layer, "tp_rank", None) != rank:
            continue
        cuts = [_cut(kind, layer, param, idx, headers[name][1], rank, world)
                for name, idx in srcs]
        if any(c is None for c in cuts):
            continue
        for (name, _), c in zip(srcs, cuts):
            if c[0] == "chunk":
                rules.append((name, c[1]))
            else:
                narrow[name] = c[1:]
        marked.append(param)
    return rules, narrow, marked


def _narrowed(it, narrow):
    for name, t in it:
        cut = narrow.get(name)
        yield name, (t if cut is None else t.narrow(*cut))


def loader_class():
    """PinioModelLoader, a subclass of vLLM's BaseModelLoader (imports vllm)."""
    global _cls
    if _cls is not None:
        return _cls
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader

    import pinio

    class PinioModelLoader(BaseModelLoader):
        """vLLM's load format "pinio": pinio.weights_iterator into
        model.load_weights (see the module's text)."""

        def __init__(self, load_config):
            super().__init__(load_config)
            self._opts = check_extra_config(load_config.load_format,
                                            getattr(load_config, "model_loader_extra_config",
                                                    None))

        def _source(self, model_config):
            lc = self.load_config
            return resolve(model_config.model, getattr(model_config, "revision", None),
                           getattr(lc, "download_dir", None), getattr(lc, "ignore_patterns", None))

        def download_model(self, model_config):
            src = self._source(model_config)
            # the headers, now: a missing or broken file fails before the
            # model is built on the device
            pinio.weights_iterator(src).close()

        def load_weights(self, model, model_config):
            t_call = time.perf_counter()
            src = self._source(model_config)
            progress = _show_progress(getattr(self.load_config, "use_tqdm_on_load", False))
            weights_to_load = {name for name, _ in model.named_parameters()}
            opts = dict(self._opts)
            group_read, slices = opts.pop("group_read", True), opts.pop("slices", True)
            tp = _tp_group()
            kw, narrow, marked = {}, {}, []
            if tp is not None:
                rank, world = tp.rank_in_group, tp.world_size
                if slices:
                    with pinio.weights_iterator(src) as probe:  # headers only
                        headers = probe.headers()
                    rules, narrow, marked = slice_plan(model, headers, rank, world)
                    if rules:
                        kw.update(split=rules + [("*", None)])
                # the cpu group: the exchange is of host tensors, which an
                # NCCL device group does not take
                if group_read:
                    kw.update(process_group=tp.cpu_group)
                elif "split" in kw:
                    kw.update(rank=rank, world=world)
            # the mark tells the weight_loaders the slice is the rank's own;
            # taken off after, as other loaders expect whole tensors
            before = [(p, p.__dict__.get("is_sharded_weight")) for p in marked]
            try:
                for p in marked:
                    p.is_sharded_weight = True
                # every rank of the group iterates to the end in step: vLLM's
                # models consume the iterator whole, and all ranks load the
                # same checkpoint
                with pinio.weights_iterator(src, progress=progress, **kw, **opts) as it:
                    loaded = model.load_weights(_narrowed(it, narrow))
            finally:
                for p, was in before:
                    if was is None:
                        p.__dict__.pop("is_sharded_weight", None)
                    else:
                        p.is_sharded_weight = was
            if getattr(model_config, "quantization", None) is None and loaded is not None:
                missing = weights_to_load - set(loaded)
                if missing:
                    raise ValueError("Following weights were not initialized from "
                                     f"checkpoint: {missing}")
            rep = it.report()
            _log.ready("vllm", _log.files(rep["files"]), rep["yielded_bytes"], t_call,
                       rep["how"], rep["io_seconds"])

    PinioModelLoader.__qualname__ = "PinioModelLoader"  # as if defined at the top
    _cls = PinioModelLoader
    return _cls


def __getattr__(name):
    # `from pinio.integrations.vllm import PinioModelLoader` imports vllm
    # then, not before
    if name == "PinioModelLoader":
        return loader_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register():
    """The vllm.general_plugins entry point: registers load format "pinio".
    Idempotent (vLLM calls it in every process, maybe more than once):
    a second call registers nothing and logs no overwrite."""
    global _registered
    from vllm.model_executor import model_loader as ml

    cls = loader_class()
    table = getattr(ml, "_LOAD_FORMAT_TO_MODEL_LOADER", None)
    if _registered and (table is None or table.get(LOAD_FORMAT) is cls):
        return cls
    ml.register_model_loader(LOAD_FORMAT)(cls)
    _registered = True
    return cls
