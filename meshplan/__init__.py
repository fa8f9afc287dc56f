"""meshplan: find, explain and run the best hybrid-parallel plan for training a transformer."""

__version__ = "0.1.0"
