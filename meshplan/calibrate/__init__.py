"""``meshplan calibrate``: measure the local GPUs (micro.py, torch) or refit end-to-end
constants on measured runs (from_runs.py), and write a profile (meshplan/profile.py)."""
