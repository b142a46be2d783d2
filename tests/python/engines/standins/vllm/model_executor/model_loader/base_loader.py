"""Stand-in of vllm/model_executor/model_loader/base_loader.py at
7679f4d267e47fdd3cc1450b62a7dc7604c380d1: BaseModelLoader(load_config), the
abstract download_model(model_config) and load_weights(model, model_config),
and load_model building the model on load_config.device or the device
config's device, calling load_weights once, then .eval() (the online
quantization branch and process_weights_after_loading are left out)."""
from abc import ABC, abstractmethod

import torch


class BaseModelLoader(ABC):
    """Base class for model loaders."""

    def __init__(self, load_config):
        self.load_config = load_config

    @abstractmethod
    def download_model(self, model_config) -> None:
        raise NotImplementedError

    @abstractmethod
    def load_weights(self, model, model_config) -> None:
        raise NotImplementedError

    def load_model(self, vllm_config, model_config, prefix=""):
        device_config = vllm_config.device_config
        load_config = vllm_config.load_config
        load_device = device_config.device if load_config.device is None else load_config.device
        target_device = torch.device(load_device)
        model = model_config.architecture(vllm_config=vllm_config, prefix=prefix)
        model.to(target_device)
        self.load_weights(model, model_config)
        return model.eval()
