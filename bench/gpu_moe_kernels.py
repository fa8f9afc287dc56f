"""Kernel-level measurements of the MoE and MLA work the cost model prices, on the local GPU
(never in tests).

    python bench/gpu_moe_kernels.py --out DIR          # on a machine with one NVIDIA GPU
    python bench/gpu_moe_kernels.py --out DIR --device cpu --quick   # plumbing check

Writes into DIR, each row one timed kernel or kernel sequence, all timed inside CUDA graphs
(meshplan.calibrate.micro.kernel_s: kernel time without the host's launch time):
- ``grouped_gemm.csv``: the expert GEMMs of real MoE models (hidden, expert FFN width, local
  experts G, tokens per expert m), forward (m x k @ k x n per expert), data gradient and
  weight gradient, for fc1 (n = 2 x FFN, SwiGLU) and fc2, run three ways: one grouped kernel
  (``torch._grouped_mm``, what torchtitan runs), one cuBLAS GEMM per expert on one stream
  (``loop1``), and one per expert spread round-robin over four streams (``loop4``: Transformer
  Engine's multi-stream cuBLAS GroupedLinear, num_streams = 4); fp8 rowwise-scaled
  ``torch._scaled_grouped_mm`` forward where the build has it;
- ``mla_attention.csv``: causal SDPA with multi-head latent attention's head dims (query/key
  192, value 128: DeepSeek-V3), by backend (cuDNN, memory-efficient; FlashAttention-2 with
  the value padded to 192, as stacks without unequal-head-dim kernels run it) and sequence
  length, with uniform head dim 192 beside it; FLOPs count the executed causal half with the
  mean head dim (d_qk + d_v) / 2, backward 2.5x the forward;
- ``moe_ops.csv``: a Megatron-style MoE layer's routing work at real sizes: router GEMM,
  softmax + top-k, sort by expert, token permutation (gather), weighted unpermutation
  (index_add), in bytes moved per second.

A deadline (--budget-s) stops a section early and keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from meshplan.calibrate.micro import kernel_s  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from gpu_kernels import sdpa_times, timer, write  # noqa: E402

# (model, hidden, expert FFN width, experts, local-expert counts measured): the presets'
# shapes (meshplan/catalog), local experts = experts / ep at the ep the published runs use
MODELS = (
    ("Qwen3-30B-A3B", 2048, 768, 128, (32, 16, 8)),
    ("DeepSeek-V3", 7168, 2048, 256, (32, 8)),
    ("GPT-OSS-120B", 2880, 2880, 128, (32, 16, 4)),
    ("Qwen3-235B-A22B", 4096, 1536, 128, (16, 4)),
    ("Mixtral-8x7B", 4096, 14336, 8, (8, 2)),
)
TOKENS_PER_EXPERT = (128, 256, 512, 1024, 2048, 4096)
STREAMS = 4  # Transformer Engine's multi-stream cuBLAS backend (cublaslt_gemm.cu)


def _timer(device: str, iters: int):
    return lambda fn: kernel_s(fn, device, 2, iters, 2e-3)


def _graph_or_eager(torch, device: str):
    """Time under CUDA graphs; where a kernel refuses capture, back to back from the host
    (gpu_kernels.timer), and say which in the row."""
    graphs, eager = _timer(device, 5), timer(torch, device)

    def run(fn, row):
        try:
            return graphs(fn)
        except Exception as e:  # noqa: BLE001 (not capturable)
            if device != "cpu":
                torch.cuda.synchronize()
            row["timing"] = "eager: " + str(e).splitlines()[0][:60]
            return eager(fn)
    return run


def _grouped_passes(torch, device, G, m, k, n, dt):
    """{pass: (grouped fn, per-expert fns)} for (G x m) x k @ G x (k x n): forward, data
    gradient (G x m) x n @ G x (n x k), weight gradient G x (k x m) @ (m x n)."""
    M = G * m
    offs = torch.arange(m, M + 1, m, device=device, dtype=torch.int32)
    x = torch.randn(M, k, device=device, dtype=dt)
    dy = torch.randn(M, n, device=device, dtype=dt)
    # grouped_mm wants its second operand column-major: store (G, n, k) and view (G, k, n)
    w = torch.randn(G, n, k, device=device, dtype=dt).transpose(-2, -1)
    wt = torch.randn(G, k, n, device=device, dtype=dt).transpose(-2, -1)  # (G, n, k) view
    xt = x.t().contiguous()  # (k, M) row-major
    dyc = torch.randn(n, M, device=device, dtype=dt).t()  # (M, n) column-major
    wl = [torch.randn(k, n, device=device, dtype=dt) for _ in range(G)]
    xs, dys = x.split(m), dy.split(m)
    return {
        "fwd": (lambda: torch._grouped_mm(x, w, offs=offs),
                [lambda i=i: torch.mm(xs[i], wl[i]) for i in range(G)], (m, n, k)),
        "dgrad": (lambda: torch._grouped_mm(dy, wt, offs=offs),
                  [lambda i=i: torch.mm(dys[i], wl[i].t()) for i in range(G)], (m, k, n)),
        "wgrad": (lambda: torch._grouped_mm(xt, dyc, offs=offs),
                  [lambda i=i: torch.mm(xs[i].t(), dys[i]) for i in range(G)], (k, n, m)),
    }


def _multi_stream(torch, fns, streams):
    """One call that launches ``fns`` round-robin over ``streams`` side streams forked from
    and joined to the current one (capturable in a CUDA graph)."""
    def run():
        cur = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(cur)
        for i, f in enumerate(fns):
            with torch.cuda.stream(streams[i % len(streams)]):
                f()
        for s in streams:
            cur.wait_stream(s)
    return run


def grouped_gemms(torch, device, time_fn, quick, deadline):
    cpu = device == "cpu"
    dt = torch.float32 if cpu else torch.bfloat16
    streams = [] if cpu else [torch.cuda.Stream() for _ in range(STREAMS)]
    fp8 = None if cpu else getattr(torch, "float8_e4m3fn", None)
    out = []
    models = MODELS[:1] if quick else MODELS
    for name, h, f, experts, groups in models:
        for G in (groups[:1] if quick else groups):
            for m in ((64, 128) if quick else TOKENS_PER_EXPERT):
                for gemm, k, n in (("fc1", h, 2 * f), ("fc2", f, h)):
                    if time.monotonic() > deadline:
                        return out
                    if quick:
                        k, n = min(k, 256), min(n, 256)
                    passes = _grouped_passes(torch, device, G, m, k, n, dt)
                    for pas, (grouped, loop, (pm, pn, pk)) in passes.items():
                        flops = 2.0 * G * pm * pn * pk
                        impls = [("grouped", grouped), ("loop1", lambda fs=loop: [g() for g in fs])]
                        if not cpu:
                            impls.append(("loop4", _multi_stream(torch, loop, streams)))
                        for impl, fn in impls:
                            row = {"model": name, "gemm": gemm, "pass": pas, "impl": impl,
                                   "dtype": "bf16", "groups": G, "m": pm, "n": pn, "k": pk}
                            try:
                                s = time_fn(fn)
                                row.update(seconds=s, tflops=round(flops / s / 1e12, 2))
                            except Exception as e:  # noqa: BLE001 (a layout the build refuses)
                                row["error"] = str(e).splitlines()[0][:120]
                            out.append(row)
                    if fp8 is not None and hasattr(torch, "_scaled_grouped_mm"):
                        out.append(_fp8_grouped(torch, device, time_fn, name, gemm, G, m, k, n,
                                                fp8))
                    del passes
            print(f"  {name} G={G} done", flush=True)
    return out


def _fp8_grouped(torch, device, time_fn, name, gemm, G, m, k, n, fp8):
    """Forward of the same GEMM as torch._scaled_grouped_mm (e4m3, rowwise fp32 scales)."""
    M = G * m
    row = {"model": name, "gemm": gemm, "pass": "fwd", "impl": "grouped", "dtype": "fp8",
           "groups": G, "m": m, "n": n, "k": k}
    try:
        offs = torch.arange(m, M + 1, m, device=device, dtype=torch.int32)
        a = torch.randn(M, k, device=device).to(fp8)
        b = torch.randn(G, n, k, device=device).to(fp8).transpose(-2, -1)
        sa = torch.ones(M, device=device, dtype=torch.float32)
        sb = torch.ones(G, n, device=device, dtype=torch.float32)
        s = time_fn(lambda: torch._scaled_grouped_mm(a, b, sa, sb, offs=offs,
                                                     out_dtype=torch.bfloat16))
        row.update(seconds=s, tflops=round(2.0 * M * n * k / s / 1e12, 2))
    except Exception as e:  # noqa: BLE001
        row["error"] = str(e).splitlines()[0][:120]
    return row


def mla_attention(torch, device, quick, deadline):
    from torch.nn.attention import SDPBackend

    cpu = device == "cpu"
    dt = torch.float32 if cpu else torch.bfloat16
    t = timer(torch, device)  # eager, as attention.csv (every call here is >= ~0.2 ms)
    be = {"math": SDPBackend.MATH} if cpu else {
        "cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION}
    seqs = (128, 256) if quick else (1024, 2048, 4096, 8192, 16384)
    tokens = 512 if quick else 32768
    heads = 16
    out = []
    for seq in seqs:
        batch = max(1, tokens // seq)
        for dqk, dv in ((192, 128), (192, 192)):
            for bname, b in be.items():
                if time.monotonic() > deadline:
                    return out
                pad = bname == "flash" and dv < dqk  # FA2: one head dim, value padded
                q, k = (torch.randn(batch, heads, seq, dqk, device=device, dtype=dt,
                                    requires_grad=True) for _ in range(2))
                v = torch.randn(batch, heads, seq, dqk if pad else dv, device=device, dtype=dt,
                                requires_grad=True)
                flops = 2.0 * batch * heads * seq * seq * (dqk + dv) * 0.5
                row = {"backend": bname + ("_padded" if pad else ""), "seq": seq,
                       "d_qk": dqk, "d_v": dv, "batch": batch, "heads": heads}
                row.update(sdpa_times(torch, t, b, q, k, v, True, flops))
                out.append(row)
                del q, k, v
    return out


def moe_ops(torch, device, quick, deadline):
    t = _graph_or_eager(torch, device)
    cpu = device == "cpu"
    dt = torch.float32 if cpu else torch.bfloat16
    el = 4 if cpu else 2
    cases = ((("Qwen3-30B-A3B", 2048, 128, 8),) if quick else
             (("Qwen3-30B-A3B", 2048, 128, 8), ("DeepSeek-V3", 7168, 256, 8),
              ("Mixtral-8x7B", 4096, 8, 2)))
    out = []
    for name, h, E, topk in cases:
        for T in ((256,) if quick else (4096, 16384)):
            if time.monotonic() > deadline:
                return out
            x = torch.randn(T, h, device=device, dtype=dt)
            wr = torch.randn(h, E, device=device, dtype=dt)
            logits = x @ wr
            probs, ids = torch.topk(torch.softmax(logits.float(), -1), topk, -1)
            flat = ids.flatten()
            order = torch.argsort(flat, stable=True)
            src = order // topk
            xp = x.index_select(0, src)
            y = torch.zeros_like(x)
            w = probs.flatten()[order].to(dt).unsqueeze(1)
            R = T * topk
            steps = {
                "router_gemm": (lambda: x @ wr, el * (T * h + h * E + T * E)),
                "softmax_topk": (lambda: torch.topk(torch.softmax(logits.float(), -1), topk, -1),
                                 4 * T * E + 12 * R),
                "sort": (lambda: torch.argsort(flat, stable=True), 16 * R),
                "permute": (lambda: x.index_select(0, src), 2 * el * R * h),
                "unpermute": (lambda: y.index_add_(0, src, xp * w), 4 * el * R * h),
            }
            for step, (fn, nbytes) in steps.items():
                row = {"model": name, "tokens": T, "hidden": h, "experts": E, "topk": topk,
                       "step": step, "bytes": nbytes}
                try:
                    s = t(fn, row)
                    row.update(seconds=s, gb_per_s=round(nbytes / s / 1e9, 1))
                except Exception as e:  # noqa: BLE001
                    row["error"] = str(e).splitlines()[0][:120]
                out.append(row)
            del x, xp, y
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--only", default="", help="comma list of sections: grouped,mla,ops")
    args = ap.parse_args()
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = args.device
    meta = {"device": torch.cuda.get_device_name(0) if dev != "cpu" else "cpu",
            "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cudnn": torch.backends.cudnn.version() if dev != "cpu" else None,
            "script": "bench/gpu_moe_kernels.py"}
    if dev != "cpu":  # the same call's large-GEMM rate, to tie these rows to gemm.csv's
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        s = _timer(dev, 5)(lambda: a @ a)
        meta["bf16_8192_cubed_tflops"] = round(2 * 8192**3 / s / 1e12, 1)
        del a
    print(json.dumps(meta), flush=True)
    (out / "moe_kernels_meta.json").write_text(json.dumps(meta, indent=1))
    only = set(filter(None, args.only.split(","))) or {"grouped", "mla", "ops"}
    start = time.monotonic()
    if "ops" in only:
        write(out / "moe_ops.csv", moe_ops(torch, dev, args.quick, start + args.budget_s * 0.1))
        print(f"moe ops done {time.monotonic() - start:.0f}s", flush=True)
    if "mla" in only:
        write(out / "mla_attention.csv",
              mla_attention(torch, dev, args.quick, start + args.budget_s * 0.3))
        print(f"mla done {time.monotonic() - start:.0f}s", flush=True)
    if "grouped" in only:
        write(out / "grouped_gemm.csv", grouped_gemms(torch, dev, _timer(dev, 5), args.quick,
                                                      start + args.budget_s))
        print(f"grouped done {time.monotonic() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
