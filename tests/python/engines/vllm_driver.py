"""One vLLM-style load through the stand-in (not a test itself; run by
test_engine_vllm.py with an installed pinio's python, PYTHONPATH=standins).

usage: vllm_driver.py SPEC_JSON REFERENCE_NPZ
SPEC: {model, revision, download_dir, extra, world, plugin_loads, tqdm,
       group}

Loads the plugins as vLLM does (vllm.plugins.load_general_plugins, from the
installed distributions' entry points; plugin_loads times, as in several
processes), then for each tensor-parallel rank of `world` builds the toy
model through get_model(load_format="pinio") and compares every parameter
byte for byte with the numpy reference, narrowed here by plain numpy.
group: {rank, world, init}: this process is that rank of a gloo job of
`world` processes set up as vLLM's workers set it up (the stand-in's
init_distributed_environment, initialize_model_parallel(world)), and loads
only its own tensor-parallel rank. read_bytes: what every
pinio.weights_iterator of the run read (its report()), summed;
yielded_bytes: what they handed out (a rank's slices, and whole tensors).
Prints one json line: {pinio_file, loader, warnings, ranks: [{mismatches}],
bars, read_bytes, yielded_bytes, group_ranks, error, ready}; ready: pinio's
end-of-load log lines (logger pinio.vllm), {level, message, pinio_*}."""
import datetime
import json
import logging
import re
import sys

import numpy as np
import torch
from torch import nn

H, HEADS, KV_HEADS, HD, INTER, VOCAB = 64, 4, 2, 16, 96, 50


def tp_shard(r, w, kv=False):
    """(rank of the shard, shards) a rank's weight_loader narrows by: k/v
    heads fewer than ranks are replicated, sliced by rank // replicas."""
    if kv and KV_HEADS < w:
        return r // (w // KV_HEADS), KV_HEADS
    return r, w


class Toy(nn.Module):
    """A Llama-shaped toy with HF checkpoint names built from the stand-in's
    vLLM layers (vllm.model_executor.layers: linear.py, vocab_parallel_
    embedding.py): qkv_proj (QKVParallelLinear) and gate_up_proj
    (MergedColumnParallelLinear) stacked, o_proj and down_proj
    RowParallelLinear, embed_tokens and lm_head vocabulary-parallel (padded:
    a loader must hand them whole), norms whole. Its packed_modules_mapping
    is vLLM's models' class attribute (llama.py). load_weights keeps each
    layer's tensors until the layer is complete before copying them (as the
    layerwise loader does) and returns the names it loaded."""

    tp = (0, 1)
    layers = 2
    packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"],
                              "gate_up_proj": ["gate_proj", "up_proj"]}

    def __init__(self, vllm_config=None, prefix=""):
        super().__init__()
        from vllm.model_executor.layers.linear import (MergedColumnParallelLinear,
                                                       QKVParallelLinear, RowParallelLinear)
        from vllm.model_executor.layers.vocab_parallel_embedding import (ParallelLMHead,
                                                                         VocabParallelEmbedding)

        r, w = self.tp
        self.rank, self.world = r, w
        tp = dict(tp_rank=r, tp_size=w)
        self.params, self.mods = {}, nn.ModuleDict()

        def add(name, mod):
            self.mods[name.replace(".", "__")] = mod
            self.params[name + ".weight"] = mod.weight

        def norm(name):
            p = nn.Parameter(torch.zeros(H, dtype=torch.float16), requires_grad=False)
            p.weight_loader = self.whole
            self.register_parameter(name.replace(".", "__"), p)
            self.params[name] = p

        add("model.embed_tokens", VocabParallelEmbedding(VOCAB, H, torch.float16, **tp))
        for i in range(self.layers):
            p = f"model.layers.{i}."
            add(p + "self_attn.qkv_proj", QKVParallelLinear(H, HD, HEADS, KV_HEADS, **tp))
            add(p + "self_attn.o_proj", RowParallelLinear(HEADS * HD, H, **tp))
            add(p + "mlp.gate_up_proj", MergedColumnParallelLinear(H, [INTER, INTER], **tp))
            add(p + "mlp.down_proj", RowParallelLinear(INTER, H, **tp))
            norm(p + "input_layernorm.weight")
        norm("model.norm.weight")
        add("lm_head", ParallelLMHead(VOCAB, H, **tp))

    def named_parameters(self, *a, **kw):
        return iter(self.params.items())

    def whole(self, p, w):
        assert p.shape == w.shape, (p.shape, w.shape)
        p.data.copy_(w)

    STACKED = [("qkv_proj", "q_proj", "q"), ("qkv_proj", "k_proj", "k"),
               ("qkv_proj", "v_proj", "v"), ("gate_up_proj", "gate_proj", 0),
               ("gate_up_proj", "up_proj", 1)]

    def load_weights(self, weights):
        loaded, layer, held = set(), None, []

        def flush():
            for name, w in held:
                for param_name, shard_name, shard_id in self.STACKED:
                    if shard_name in name:
                        pn = name.replace(shard_name, param_name)
                        p = self.params[pn]
                        p.weight_loader(p, w, shard_id)
                        loaded.add(pn)
                        break
                else:
                    if name not in self.params:
                        continue  # as vLLM's models skip unexpected names
                    p = self.params[name]
                    p.weight_loader(p, w)
                    loaded.add(name)
            held.clear()

        for name, w in weights:
            m = re.match(r"model\.layers\.(\d+)\.", name)
            now = m.group(1) if m else None
            if now != layer:
                flush()
                layer = now
            held.append((name, w))
        flush()
        return loaded


def expected(ref, name, r, w):
    """The parameter `name` of rank r of w, from the checkpoint's arrays."""
    if "qkv_proj" in name:
        b = name.replace("qkv_proj", "{}")
        q = np.split(ref[b.format("q_proj")], w)[r]
        sr, n = tp_shard(r, w, kv=True)
        k = np.split(ref[b.format("k_proj")], n)[sr]
        v = np.split(ref[b.format("v_proj")], n)[sr]
        return np.concatenate([q, k, v])
    if "gate_up_proj" in name:
        b = name.replace("gate_up_proj", "{}")
        return np.concatenate([np.split(ref[b.format("gate_proj")], w)[r],
                               np.split(ref[b.format("up_proj")], w)[r]])
    if "o_proj" in name or "down_proj" in name:
        return np.split(ref[name], w, axis=1)[r]
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        # the padded vocabulary's rows of this rank, zeros past the real ones
        per = (VOCAB + 63) // 64 * 64 // w
        rows = ref[name][r * per:(r + 1) * per]
        return np.concatenate([rows, np.zeros((per - len(rows), H), rows.dtype)])
    return ref[name]


def main():
    spec = json.loads(sys.argv[1])
    ref = dict(np.load(sys.argv[2]))
    warnings = []

    ready = []  # pinio's end-of-load lines: {level, message, pinio_* attributes}

    class Catch(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())
            if record.name == "pinio.vllm":
                ready.append(dict({k: v for k, v in vars(record).items()
                                   if k.startswith("pinio_")},
                                  level=record.levelname, message=record.getMessage()))

    logging.getLogger().addHandler(Catch())
    logging.getLogger("pinio").setLevel(logging.INFO)
    import pinio
    import tqdm
    import vllm.plugins
    from vllm.config import LoadConfig, ModelConfig, VllmConfig
    from vllm.model_executor.model_loader import get_model, _LOAD_FORMAT_TO_MODEL_LOADER

    out = {"pinio_file": pinio.__file__, "warnings": warnings, "ranks": [], "ready": ready}
    iterators, plain = [], pinio.weights_iterator

    def counted(*a, **kw):
        it = plain(*a, **kw)
        iterators.append(it)
        return it

    pinio.weights_iterator = counted
    g = spec.get("group")
    try:
        if g:
            from vllm.distributed import parallel_state as ps

            ps.init_distributed_environment(g["world"], g["rank"], "file://" + g["init"],
                                            backend="gloo",
                                            timeout=datetime.timedelta(seconds=90))
            ps.initialize_model_parallel(g["world"])
            tp = ps.get_tp_group()
            out["group_ranks"] = tp.ranks
        for _ in range(spec.get("plugin_loads", 1)):
            vllm.plugins.plugins_loaded = False  # as a new process would start
            vllm.plugins.load_general_plugins()
        cls = _LOAD_FORMAT_TO_MODEL_LOADER.get("pinio")
        out["loader"] = None if cls is None else f"{cls.__module__}.{cls.__qualname__}"
        Toy.layers = spec.get("layers", 2)
        w = spec.get("world", 1)
        if g:
            w = ps.get_tensor_model_parallel_world_size()
        for r in [ps.get_tensor_model_parallel_rank()] if g else range(w):
            Toy.tp = (r, w)
            lc = LoadConfig(load_format="pinio", download_dir=spec.get("download_dir"),
                            model_loader_extra_config=spec.get("extra", {}),
                            use_tqdm_on_load=spec.get("tqdm", True))
            mc = ModelConfig(model=spec["model"], revision=spec.get("revision"),
                             architecture=Toy)
            from vllm.model_executor.model_loader import get_model_loader

            get_model_loader(lc).download_model(mc)
            model = get_model(vllm_config=VllmConfig(model_config=mc, load_config=lc))
            bad = []
            for name, p in model.params.items():
                want = expected(ref, name, r, w)
                got = p.detach().numpy()
                if got.dtype != want.dtype or got.shape != want.shape \
                        or got.tobytes() != want.tobytes():
                    bad.append(name)
            out["ranks"].append({"params": len(model.params), "mismatches": bad})
    except Exception as e:  # the test asserts on it
        out["error"] = f"{type(e).__name__}: {e}"
    out["read_bytes"] = sum(it.report()["read_bytes"] for it in iterators)
    out["yielded_bytes"] = sum(it.report()["yielded_bytes"] for it in iterators)
    if "group_ranks" in out:
        ps.destroy_model_parallel()
        ps.destroy_distributed_environment()
    out["bars"] = [{"total": b.total, "n": b.n, "closed": b.closed} for b in tqdm.BARS]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
