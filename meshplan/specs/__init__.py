"""Inputs of the planner: the model, the hardware and the workload."""
