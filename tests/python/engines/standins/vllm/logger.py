"""Stand-in of vllm/logger.py: init_logger is a logging.getLogger."""
import logging


def init_logger(name):
    return logging.getLogger(name)
