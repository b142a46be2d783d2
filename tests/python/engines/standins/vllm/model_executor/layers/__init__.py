"""Stand-in of vllm/model_executor/layers (linear.py only)."""
