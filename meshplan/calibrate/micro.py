"""Microbenchmarks for ``meshplan calibrate`` (torch; imported only by that command).

Each function times one kind of kernel the cost model prices and returns plain numbers:
a GEMM sweep over square and transformer-like shapes, flash attention through torch's
scaled_dot_product_attention (forward and backward, causal), an element-wise copy (HBM
bandwidth), and, inside an initialised process group, NCCL (or gloo) collectives over the
group sizes a plan uses. On ``device="cpu"`` the same code runs on CPU tensors: the stand-in
the tests use (the numbers are then the CPU's, not a GPU's).
"""

from __future__ import annotations

import time


def _torch():
    import torch

    return torch


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        _torch().cuda.synchronize()


def _time(fn, device: str, warmup: int, iters: int) -> float:
    """Median seconds of ``fn()`` over ``iters`` runs after ``warmup`` (host clock around each
    run: for kernels far longer than a launch, and for the CPU stand-in)."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def events_s(fn, warmup: int, iters: int, target_s: float = 20e-3) -> float:
    """Seconds per call of ``fn()`` on the GPU, launched back to back (no host sync between
    calls) for ~``target_s`` between two CUDA events; the median over ``iters`` batches. For
    kernels far longer than a launch that CUDA graphs may not capture (attention)."""
    torch = _torch()
    for _ in range(max(1, warmup)):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    reps = int(min(200, max(3, target_s / max(time.perf_counter() - t0, 1e-6))))
    out = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / reps)
    out.sort()
    return out[len(out) // 2]


def kernel_s(fn, device: str, warmup: int = 3, iters: int = 10, target_s: float = 2e-3) -> float:
    """Seconds of the kernels ``fn()`` launches, without the host's time to launch them: on
    a GPU, as many calls as fill ~``target_s`` captured in one CUDA graph and replayed between
    two CUDA events, the median per call over ``iters`` replays. A GEMM of 1024^3 runs ~5 us
    on an H100/H200, while eager PyTorch took ~20-30 us to issue one on the lent H200 VM
    (bench/data/measured/h200_2026-11-27: every GEMM under ~40 us read the launch rate, not
    the kernel, when timed per call or back to back). The CPU stand-in: ``_time``."""
    if not device.startswith("cuda"):
        return _time(fn, device, warmup, iters)
    torch = _torch()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (cuBLAS handles, workspaces) off the capture
        for _ in range(max(1, warmup)):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def replay_s(graph, calls: int) -> float:
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls

    one = torch.cuda.CUDAGraph()
    with torch.cuda.graph(one):
        fn()
    one.replay()
    reps = int(min(100, max(3, target_s / max(replay_s(one, 1), 1e-7))))
    many = torch.cuda.CUDAGraph()
    with torch.cuda.graph(many):
        for _ in range(reps):
            fn()
    many.replay()
    times = sorted(replay_s(many, reps) for _ in range(iters))
    return times[len(times) // 2]


def gemm_sweep(device: str, dtype: str, shapes: list[tuple[int, int, int]], warmup: int = 3,
               iters: int = 10) -> list[dict]:
    """FLOP/s of C[m, n] = A[m, k] @ B[k, n] for each (m, n, k)."""
    torch = _torch()
    dt = getattr(torch, dtype)
    out = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device=device, dtype=dt)
        b = torch.randn(k, n, device=device, dtype=dt)
        s = kernel_s(lambda: torch.matmul(a, b), device, warmup, iters)
        out.append({"m": m, "n": n, "k": k, "seconds": s, "flops_per_s": 2.0 * m * n * k / s})
        del a, b
    return out


def attention(device: str, dtype: str, batch: int, heads: int, seq: int, head_dim: int,
              warmup: int = 2, iters: int = 5) -> dict:
    """Causal SDPA forward and backward FLOP/s, counting the executed causal half
    (2 matmuls forward, 2.5x that backward; FlashAttention-2 sec. 3)."""
    torch = _torch()
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device=device, dtype=dt,
                           requires_grad=True) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    o = sdpa(q, k, v, is_causal=True)
    g = torch.randn_like(o)
    if device.startswith("cuda"):
        # back to back between CUDA events, as bench/gpu_kernels.py timed attention.csv: one
        # call per host sync read 9% low on an H100 at 4k keys (531 against 585 TFLOP/s
        # forward, bench/data/measured/h100_2026-11-27); the backward as forward + backward
        # less the forward, each the median of ``iters`` batches
        fwd = events_s(lambda: sdpa(q, k, v, is_causal=True), warmup, iters)
        both = events_s(lambda: torch.autograd.grad(sdpa(q, k, v, is_causal=True), (q, k, v),
                                                     g), warmup, iters)
        bwd = max(both - fwd, 1e-3 * fwd)
    else:
        fwd = _time(lambda: sdpa(q, k, v, is_causal=True), device, warmup, iters)
        # the backward timed on its own (a fresh forward before each, untimed): the
        # difference of two host timings could read ~0 and give an absurd rate
        times = []
        for i in range(warmup + iters):
            out = sdpa(q, k, v, is_causal=True)
            t0 = time.perf_counter()
            out.backward(g)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
            q.grad = k.grad = v.grad = None
        times.sort()
        bwd = times[len(times) // 2]
    flops_fwd = 4.0 * batch * heads * seq * (seq / 2) * head_dim
    return {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
            "fwd_s": fwd, "bwd_s": bwd,
            "fwd_flops_per_s": flops_fwd / fwd,
            "bwd_flops_per_s": 2.5 * flops_fwd / bwd}


def copy_bandwidth(device: str, nbytes: int, warmup: int = 3, iters: int = 10) -> dict:
    """Device-to-device copy through an element-wise kernel (b = a x 1): bytes read + written
    per second. Not ``b.copy_(a)``: captured in a CUDA graph, a copy of 1 GiB or more ran at
    2.43 TB/s on an H100 and 2.71 on an H200 while the same copy issued eagerly, and a x 1 in
    or out of a graph, ran at 3.0 and 4.26 (bench/data/measured/h100_2026-11-27/copycheck.txt
    and h200_2026-11-27/copycheck.txt): the graph's memcpy node is not the SM copy kernel the
    element-wise work the cost model prices runs like."""
    torch = _torch()
    n = nbytes // 2
    a = torch.empty(n, device=device, dtype=torch.bfloat16).fill_(1)
    b = torch.empty_like(a)
    s = kernel_s(lambda: torch.mul(a, 1, out=b), device, warmup, iters)
    return {"bytes": 2 * n, "seconds": s, "bytes_per_s": 2.0 * 2 * n / s}


BUS_FACTOR = {  # nccl-tests: bus bandwidth = algorithm bandwidth x this (n ranks)
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def collectives(device: str, sizes_bytes: list[int], group_sizes: list[int], warmup: int = 2,
                iters: int = 5) -> list[dict]:
    """Bus bandwidth of each collective per group size and message size, in an initialised
    torch.distributed process group (torchrun). Groups are consecutive ranks (inside a node
    first, as the planner lays tp innermost). Every rank must call this; rank 0's list is
    the result."""
    torch = _torch()
    import torch.distributed as dist

    world, rank = dist.get_world_size(), dist.get_rank()
    out = []
    for g in group_sizes:
        if g < 2 or world % g:
            continue
        groups = [dist.new_group(list(range(s, s + g))) for s in range(0, world, g)]
        pg = groups[rank // g]
        for nbytes in sizes_bytes:
            n = max(g, nbytes // 2 // g * g)
            x = torch.ones(n, device=device, dtype=torch.bfloat16)
            shard = torch.empty(n // g, device=device, dtype=torch.bfloat16)
            full = torch.empty(n, device=device, dtype=torch.bfloat16)
            ops = {
                "all_reduce": lambda: dist.all_reduce(x, group=pg),
                "all_gather": lambda: dist.all_gather_into_tensor(full, shard, group=pg),
                "reduce_scatter": lambda: dist.reduce_scatter_tensor(shard, x, group=pg),
                "all_to_all": lambda: dist.all_to_all_single(full, x, group=pg),
            }
            for name, fn in ops.items():
                try:
                    s = _time(fn, device, warmup, iters)
                except (RuntimeError, NotImplementedError) as e:  # e.g. gloo lacks one
                    out.append({"collective": name, "group": g, "bytes": 2 * n,
                                "error": str(e).splitlines()[0][:120]})
                    continue
                t = torch.tensor([s], dtype=torch.float64, device=device)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the time
                s = float(t.item())
                out.append({"collective": name, "group": g, "bytes": 2 * n, "seconds": s,
                            "bus_bytes_per_s": BUS_FACTOR[name](g) * 2 * n / s})
    return out
