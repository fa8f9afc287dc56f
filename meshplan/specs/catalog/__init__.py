"""Built-in catalogs: GPUs (gpus.py) and model presets (models/*.json via presets.py)."""
