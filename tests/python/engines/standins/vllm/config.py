"""Stand-in of the configs a loader reads (vllm/config/load.py's LoadConfig,
ModelConfig, DeviceConfig, VllmConfig), with the fields named in
default_loader.py@0e06f49835a66b11f2b74410d30b1f88575ee527 and
base_loader.py@7679f4d267e47fdd3cc1450b62a7dc7604c380d1.
ModelConfig.architecture (the model class) stands in for vLLM's
architecture registry, which resolves it from config.json."""
import dataclasses
from typing import Any, Optional


@dataclasses.dataclass
class LoadConfig:
    load_format: str = "auto"
    download_dir: Optional[str] = None
    model_loader_extra_config: dict = dataclasses.field(default_factory=dict)
    device: Optional[str] = None
    ignore_patterns: Optional[list] = dataclasses.field(default_factory=lambda: ["original/**/*"])
    use_tqdm_on_load: bool = True
    safetensors_load_strategy: Optional[str] = None


@dataclasses.dataclass
class ModelConfig:
    model: str
    revision: Optional[str] = None
    quantization: Optional[str] = None
    dtype: Any = None
    architecture: Any = None


@dataclasses.dataclass
class DeviceConfig:
    device: str = "cpu"


@dataclasses.dataclass
class VllmConfig:
    model_config: ModelConfig
    load_config: LoadConfig
    device_config: DeviceConfig = dataclasses.field(default_factory=DeviceConfig)
