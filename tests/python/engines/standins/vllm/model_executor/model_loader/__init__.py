"""Stand-in of vllm/model_executor/model_loader/__init__.py at
e9234694f494887ddbeafed08095a1dfa5745369: _LOAD_FORMAT_TO_MODEL_LOADER,
register_model_loader (a warning when a name is overwritten, ValueError
unless the class is a BaseModelLoader subclass) and get_model_loader
(cls(load_config), or ValueError "Load format `x` is not supported").
The in-tree loaders are not stood in: only their names are in the table."""
from vllm.logger import init_logger
from vllm.model_executor.model_loader.base_loader import BaseModelLoader

logger = init_logger(__name__)


class _InTree(BaseModelLoader):
    """Placeholder for vLLM's own loaders (not stood in)."""

    def download_model(self, model_config):
        raise NotImplementedError("an in-tree loader of the stand-in")

    def load_weights(self, model, model_config):
        raise NotImplementedError("an in-tree loader of the stand-in")


_LOAD_FORMAT_TO_MODEL_LOADER = {
    name: _InTree for name in ("auto", "bitsandbytes", "dummy", "fastsafetensors", "gguf",
                               "mistral", "npcache", "pt", "runai_streamer",
                               "runai_streamer_sharded", "safetensors", "sharded_state",
                               "tensorizer")
}


def register_model_loader(load_format: str):
    def _wrapper(model_loader_cls):
        if load_format in _LOAD_FORMAT_TO_MODEL_LOADER:
            logger.warning("Load format `%s` is already registered, and will be "
                           "overwritten by the new loader class `%s`.", load_format,
                           model_loader_cls)
        if not issubclass(model_loader_cls, BaseModelLoader):
            raise ValueError("The model loader must be a subclass of `BaseModelLoader`.")
        _LOAD_FORMAT_TO_MODEL_LOADER[load_format] = model_loader_cls
        logger.info("Registered model loader `%s` with load format `%s`", model_loader_cls,
                    load_format)
        return model_loader_cls

    return _wrapper


def get_model_loader(load_config) -> BaseModelLoader:
    load_format = load_config.load_format
    if load_format not in _LOAD_FORMAT_TO_MODEL_LOADER:
        raise ValueError(f"Load format `{load_format}` is not supported")
    return _LOAD_FORMAT_TO_MODEL_LOADER[load_format](load_config)


def get_model(*, vllm_config, model_config=None):
    loader = get_model_loader(vllm_config.load_config)
    if model_config is None:
        model_config = vllm_config.model_config
    return loader.load_model(vllm_config=vllm_config, model_config=model_config)
