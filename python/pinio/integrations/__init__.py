"""pinio inside the engines (issue 39): each module plugs pinio's
weights_iterator / safe_open into one engine, the way that engine finds
loaders, importing the engine only when it is used.

    pinio.integrations.vllm          load format "pinio" (vllm.general_plugins)
    pinio.integrations.transformers  patch(): safe_open of modeling_utils
    pinio.integrations.diffusers     patch(): load_state_dict

They are tested against contract stand-ins recorded from the engines'
files (cited file@commit in each module), not against the engines."""
