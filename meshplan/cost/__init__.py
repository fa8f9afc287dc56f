"""The cost model: estimate(model, cluster, workload, plan) -> Estimate."""

from .step import Breakdown, ChunkCost, CommAxis, Estimate, estimate

__all__ = ["Breakdown", "ChunkCost", "CommAxis", "Estimate", "estimate"]
