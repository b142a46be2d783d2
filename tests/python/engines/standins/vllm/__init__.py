"""A contract stand-in for vLLM (tests only; it is not vLLM): the modules,
names, signatures and behaviours a load-format plugin meets, recorded from
vllm-project/vllm's files (each module cites file@commit). It proves that
pinio keeps the contract as recorded, not that vLLM still has it: re-read
the cited files when touching this."""
