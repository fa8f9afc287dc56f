"""A dense decoder layer stack's forward + backward on the local GPU (never in tests): the
kernels the cost model prices one by one, run together as a training step runs them.

    python bench/gpu_layer_step.py --out DIR [--seconds 40]          # one NVIDIA GPU
    python bench/gpu_layer_step.py --out DIR --device cpu --quick     # plumbing check

The stack is ``--layers`` Llama-style layers (pre-norm RMSNorm, fused QKV, rotary embedding,
causal SDPA, output projection, fused gate/up SwiGLU MLP, residual adds; bf16 weights, no
optimizer), shape from ``--hidden/--ffn/--heads/--seq/--micro-batch`` (default Llama 2 7B at
4,096 tokens, two sequences). Writes into DIR:

- ``layer_step.json``: the device, clocks and the step times: ``eager_s`` launched from Python
  (as meshplan's runtime runs it; under ``--compile`` the compiled step), and eager with a
  host-device sync (``.item()``) before each attention forward, as flash-attn's varlen
  interface makes one per call for ``max_seqlen``; the step captured in one CUDA graph (kernel time, no launch overhead) at its first
  seconds and held for ``--seconds`` (``layer_sustained.csv``: step time every ``--every``
  seconds with nvidia-smi's SM clock, power and throttle reasons); and, under
  ``sync_gemm_chain``, what one such sync adds to a chain of 4096^3 GEMMs (an ``.item()``
  after each against none);
- ``layer_kernels.csv``: the device time of every kernel of one eager step under
  torch.profiler, once cold (before the held run) and once hot (right after it), by kernel
  name, with a class (gemm, attention, other).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_kernels import ROOT, write  # noqa: E402
from gpu_sustained import smi  # noqa: E402

sys.path.insert(0, str(ROOT))
from meshplan.calibrate.micro import _time as median_s  # noqa: E402


def build(torch, hidden, ffn, heads, layers, seq, device, dtype, sync_attention):
    nn, F = torch.nn, torch.nn.functional
    hd = hidden // heads
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    ang = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(dtype)
    pos = torch.arange(seq, device=device, dtype=torch.int32)

    def rope(x):  # [b, heads, s, hd]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1 = nn.RMSNorm(hidden, device=device, dtype=dtype)
            self.n2 = nn.RMSNorm(hidden, device=device, dtype=dtype)
            self.qkv = nn.Linear(hidden, 3 * hidden, bias=False, device=device, dtype=dtype)
            self.o = nn.Linear(hidden, hidden, bias=False, device=device, dtype=dtype)
            self.fc1 = nn.Linear(hidden, 2 * ffn, bias=False, device=device, dtype=dtype)
            self.fc2 = nn.Linear(ffn, hidden, bias=False, device=device, dtype=dtype)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, s, 3, heads, hd).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            if sync_attention[0]:
                int(pos[-1].item()) + 1  # flash-attn varlen's max_seqlen: one host sync
            a = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, s, hidden))
            g, u = self.fc1(self.n2(x)).chunk(2, -1)
            return x + self.fc2(F.silu(g) * u)

    return nn.Sequential(*[Layer() for _ in range(layers)])


def kernel_class(name: str) -> str:
    n = name.lower()
    if any(t in n for t in ("flash", "fmha", "cudnn", "attn", "sdpa")):
        return "attention"
    if any(t in n for t in ("gemm", "xmma", "cutlass", "nvjet", "sm90_", "sm80_", "matmul")):
        return "gemm"
    return "other"


def profile(torch, step, device, tag):
    from torch.profiler import ProfilerActivity, profile as prof

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device != "cpu" else [])
    step()
    with prof(activities=acts) as p:
        step()
        if device != "cpu":
            torch.cuda.synchronize()
    rows = []
    for e in p.key_averages():
        us = getattr(e, "device_time_total", 0.0) if device != "cpu" else e.cpu_time_total
        if device != "cpu" and (e.device_type.name != "CUDA" or us <= 0):
            continue
        if device == "cpu" and not e.key.startswith("aten::"):
            continue
        rows.append({"phase": tag, "kernel": e.key[:160], "class": kernel_class(e.key),
                     "calls": e.count, "device_us": round(us, 1)})
    return rows


def sync_cost(torch, device, n, calls=200):
    """Seconds one host-device sync adds to a chain of ``calls`` n^3 GEMMs: the chain with an
    ``.item()`` after every GEMM against the same chain launched without, per sync."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16 if device != "cpu" else torch.float32)
    flag = torch.zeros((), device=device)

    def chain(sync):
        for _ in range(calls):
            c = a @ a
            if sync:
                flag.add_(c[0, 0]).item()

    free = median_s(lambda: chain(False), device, 1, 5)
    synced = median_s(lambda: chain(True), device, 1, 5)
    return {"gemm_n": n, "calls": calls, "chain_s": free, "chain_synced_s": synced,
            "per_sync_s": (synced - free) / calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--backend", default="cudnn", choices=("cudnn", "flash"))
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the stack (Inductor fuses the element-wise work, as "
                         "torchtitan's compiled runs do); the sync variant is skipped")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--every", type=float, default=5.0)
    args = ap.parse_args()
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev, cuda = args.device, args.device != "cpu"
    if args.quick:
        args.hidden, args.ffn, args.heads, args.layers, args.seq = 256, 512, 4, 2, 128
        args.micro_batch, args.seconds, args.every = 1, 2.0, 1.0
    dtype = torch.bfloat16 if cuda else torch.float32
    sync = [False]
    model = build(torch, args.hidden, args.ffn, args.heads, args.layers, args.seq, dev, dtype,
                  sync)
    if args.compile:
        model = torch.compile(model)
    x = torch.randn(args.micro_batch, args.seq, args.hidden, device=dev, dtype=dtype)
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION,
               "flash": SDPBackend.FLASH_ATTENTION}[args.backend] if cuda else SDPBackend.MATH
    hd = args.hidden // args.heads
    tokens = args.micro_batch * args.seq
    # forward FLOPs: 2 x params x tokens for the linears, causal attention's executed half
    lin = 2.0 * tokens * args.layers * (4 * args.hidden ** 2 + 3 * args.hidden * args.ffn)
    att = 4.0 * args.micro_batch * args.heads * args.seq ** 2 * hd * 0.5 * args.layers
    meta = {"device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version() if cuda else None,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "shape": {k: getattr(args, k) for k in ("hidden", "ffn", "heads", "layers", "seq",
                                                     "micro_batch", "backend", "compile")},
            "linear_fwd_flops": lin, "attention_fwd_flops_causal_half": att,
            "step_flops": 3 * lin + 3.5 * att, "smi_start": smi()}

    def step():
        with sdpa_kernel(backend):
            for p in model.parameters():
                p.grad = None
            model(x).float().mean().backward()

    res = {}
    try:
        step()
    except RuntimeError as e:  # cuDNN refusing the layout: the flash backend instead
        if not cuda or args.backend != "cudnn":
            raise
        backend = SDPBackend.FLASH_ATTENTION
        meta["shape"]["backend"] = "flash (cudnn refused: %s)" % str(e).splitlines()[0][:120]
    res["sync_gemm_chain"] = sync_cost(torch, dev, 256 if args.quick else 4096)
    for s in ((False,) if args.compile else (False, True)):
        sync[0] = s
        key = "eager_sync_per_attention_s" if s else "eager_s"
        res[key] = median_s(step, dev, 1, 3 if args.quick else 10)
    sync[0] = False
    res["syncs_per_step"] = 0 if args.compile else args.layers
    kernels = profile(torch, step, dev, "cold")
    if cuda:
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            for p in model.parameters():
                p.grad = None
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                with sdpa_kernel(backend):
                    model(x).float().mean().backward()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

            def replay(n):
                e0.record()
                for _ in range(n):
                    g.replay()
                e1.record()
                e1.synchronize()
                return e0.elapsed_time(e1) / 1e3 / n

            replay(3)
            res["graph_first_s"] = sorted(replay(1) for _ in range(10))[5]
            held, t_start = [], time.monotonic()
            per = max(1, int(args.every / max(res["graph_first_s"], 1e-4)))
            while time.monotonic() - t_start < args.seconds:
                s = replay(per)
                row = {"t_s": round(time.monotonic() - t_start, 1), "step_s": round(s, 6),
                       "tflops": round(meta["step_flops"] / s / 1e12, 1)}
                row.update(smi())
                held.append(row)
                print(json.dumps(row), flush=True)
            write(out / "layer_sustained.csv", held)
            tail = [r["step_s"] for r in held[len(held) // 2:]]
            res["graph_held_s"] = sorted(tail)[len(tail) // 2] if tail else None
            replay(per)  # keep it hot up to the profile
        except Exception as e:  # noqa: BLE001 (a backend that refuses capture)
            res["graph_error"] = str(e).splitlines()[0][:200]
            print("graph:", res["graph_error"], flush=True)
    kernels += profile(torch, step, dev, "hot")
    write(out / "layer_kernels.csv", kernels)
    for tag in ("cold", "hot"):
        for c in ("gemm", "attention", "other"):
            res[f"{tag}_{c}_s"] = sum(r["device_us"] for r in kernels
                                      if r["phase"] == tag and r["class"] == c) / 1e6
    meta["smi_end"] = smi()
    meta["results"] = res
    (out / "layer_step.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
