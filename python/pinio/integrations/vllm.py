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

What it does: download_model resolves the model offline (a local folder,
a hub repo id in load_config.download_dir or the hub cache, an s3:// URL)
and downloads nothing; load_weights calls model.load_weights() once with
pinio.weights_iterator(...) over the safetensors files: whole tensors (the
model's weight_loaders narrow them by tensor-parallel rank, which is
always correct), read in batches freed as the model copies them. Under
tensor parallelism (vLLM's TP group larger than 1) the group reads the
checkpoint once: process_group= is the TP group's gloo cpu_group, each
batch read once across the group and exchanged, every rank still getting
whole tensors (extra config group_read: false reads it on every rank).
model_loader_extra_config takes the keys of EXTRA_CONFIG."""
import fnmatch
import glob
import os

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
                   "a bool (false: every tensor-parallel rank reads the whole checkpoint)"),
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
    downloaded) or an s3:// URL. RuntimeError when there are no weights."""
    if model.startswith("s3://"):
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


def _tp_cpu_group(group_read):
    """The process group that reads the checkpoint once: vLLM's TP group's
    gloo cpu_group when it has more than one rank, else None."""
    if not group_read:
        return None
    from vllm.distributed import parallel_state as ps

    # Whole tensors, not each rank's slices: only the model's weight_loaders
    # know vLLM's narrowing (is_sharded_weight, k/v by rank //
    # num_kv_head_replicas, whole embeddings), so the group exchanges whole
    # tensors and they narrow as they would with any loader. The cpu group,
    # not the device group: the exchange is of host tensors, which an NCCL
    # device group does not take.
    if not ps.model_parallel_is_initialized():
        return None
    tp = ps.get_tp_group()
    return tp.cpu_group if tp.world_size > 1 else None


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
            src = self._source(model_config)
            progress = _show_progress(getattr(self.load_config, "use_tqdm_on_load", False))
            weights_to_load = {name for name, _ in model.named_parameters()}
            opts = dict(self._opts)
            group = _tp_cpu_group(opts.pop("group_read", True))
            # every rank of the group iterates to the end in step: vLLM's
            # models consume the iterator whole, and all ranks load the
            # same checkpoint
            with pinio.weights_iterator(src, progress=progress, process_group=group,
                                        **opts) as it:
                loaded = model.load_weights(it)
            if getattr(model_config, "quantization", None) is None and loaded is not None:
                missing = weights_to_load - set(loaded)
                if missing:
                    raise ValueError("Following weights were not initialized from "
                                     f"checkpoint: {missing}")

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
