"""Search over the plan space (space.py: generators; search.py: evaluate, prune, rank)."""
