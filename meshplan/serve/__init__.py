"""Serving: plan, cost, simulate, search and export the parallelism of an inference deployment.

spec.py (what a serving plan is), memory.py (weights and KV cache per GPU), cost.py
(iteration time of one engine step), traffic.py (requests), simulate.py (continuous batching),
search.py (plans and the Pareto front), explain.py, export.py (vLLM / SGLang), validate.py
(published serving runs).
"""
