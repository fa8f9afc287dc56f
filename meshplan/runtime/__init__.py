"""Execute a meshplan ``Plan`` on torch.distributed (needs the ``meshplan[run]`` extra).

One module per concern: ``model`` (the decoder built from a ModelSpec), ``mesh`` (the
DeviceMesh laid out as the plan says), ``data_parallel`` (FSDP2 / HSDP / replication),
``tensor_parallel`` (DTensor TP + SP + loss parallel), ``pipeline`` (torch.distributed.pipelining
stages and schedules), ``context_parallel`` (ring attention), ``expert_parallel`` (all-to-all
token dispatch), ``train`` (the step loop, measurement), ``checkpoint`` (DCP), ``launch``
(processes), ``dryrun`` (fake tensors + fake process group + MemTracker).

Nothing outside this package imports torch; import it only where torch is installed.
"""
