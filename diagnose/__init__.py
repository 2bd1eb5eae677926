"""diagnose: why an LLM inference server under systemd failed, and what to change."""

__version__ = "0.1.0"
