"""Microbenchmark results -> named constants of meshplan/cost/efficiency.py (no torch).

Each measured figure becomes the fraction of the GPU's datasheet figure that the cost model
uses for it; a measurement whose constant efficiency.py no longer defines is reported and
skipped (names are looked up at run time through meshplan.profile).
"""

from __future__ import annotations

import math

from .. import profile
from ..cost import compute
from ..specs.hardware import GPU

SQUARE = (1024, 2048, 4096, 8192)
BIG = 8192


def default_shapes(quick: bool = False) -> list[tuple[int, int, int]]:
    """Square GEMMs (the efficiency curve) plus transformer shapes (tokens x hidden x 3h,
    x 4h) at hidden 4096 and 8192 as the cost model prices them."""
    sq = [(d, d, d) for d in (SQUARE[1:] if quick else SQUARE)]
    tf = [] if quick else [(8192, 3 * 4096, 4096), (8192, 4096, 14336), (4096, 8192, 28672)]
    return sq + tf


def _value(name: str):
    mod = profile._module()
    obj = getattr(mod, name.split(".")[0], None)
    for k in name.split(".")[1:]:
        if obj is None:
            return None
        obj = obj.get(k) if isinstance(obj, dict) else getattr(obj, k, None)
    return obj if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None


def clock_factor(gpu: GPU) -> float:
    """The clock scaling the cost model applies to this GPU (power cap), so a measured
    fraction is stored as the model will use it."""
    gen = gpu.generation or "hopper"
    full = _value(f"EFFICIENCY.{gen}.full_clock_power_w") or 0.0
    exp = _value("POWER_CLOCK_EXPONENT") or 1.0
    if gpu.power_limit_w and full:
        return min(1.0, (gpu.power_limit_w / full) ** exp)
    return 1.0


TILE_LATENCY_GRID_S = tuple(x * 0.25e-6 for x in range(1, 81))  # 0.25-20 us


def square_gemm_flops(gpu: GPU, d: int, big_flops: float, tile_latency_s: float,
                      flop_per_load_byte: float, hbm_bytes_per_s: float) -> float:
    """FLOP/s of a d^3 bf16 GEMM by the shape model (cost/gemm.py) when 8192^3 runs at
    ``big_flops`` and one CTA tile costs ``tile_latency_s`` beyond its K-loop."""
    from ..cost import gemm

    sms, gen = gemm.sm_count(gpu), gpu.generation or "hopper"
    load = gemm.sm_load_bytes_per_s(gpu, flop_per_load_byte)
    f = gemm.flops_per_sm(big_flops, sms, load, tile_latency_s, hbm_bytes_per_s, 2, gen)
    return 2.0 * d**3 / gemm.gemm_s(d, d, d, 1, sms, f, load, tile_latency_s, hbm_bytes_per_s,
                                    2, gen)


def fit_tile_latency(sweep: list[dict], gpu: GPU) -> float | None:
    """The fixed time per CTA tile (K-loop fill + epilogue) of the GEMM shape model that best
    reproduces the measured square GEMMs relative to the 8192^3 one (least squares in log)."""
    sq = {r["m"]: r["flops_per_s"] for r in sweep if r["m"] == r["n"] == r["k"]}
    if BIG not in sq or len(sq) < 3:
        return None
    gen = gpu.generation or "hopper"
    per_byte = _value(f"EFFICIENCY.{gen}.gemm_flop_per_load_byte") or 90.0
    hbm = gpu.memory_bytes_per_s * (_value(f"EFFICIENCY.{gen}.memory") or 0.9)
    best = None
    for lat in TILE_LATENCY_GRID_S:
        err = sum((math.log(sq[d] / square_gemm_flops(gpu, d, sq[BIG], lat, per_byte, hbm))) ** 2
                  for d in sq if d != BIG)
        if best is None or err < best[0]:
            best = (err, lat)
    return best[1]


def _nvls(gpu: GPU) -> bool:
    from ..cost import collectives

    return (gpu.generation in collectives._NVLS_GENERATIONS
            and gpu.scaleup_bytes_per_s >= collectives._PCIE_MAX_BYTES_PER_S)


def _hop_s(gpu: GPU, ll: bool = False) -> float:
    """Latency of one scale-up ring hop the model charges (Simple, or LL with ``ll``)."""
    from ..cost import collectives

    kind = "pcie" if gpu.scaleup_bytes_per_s < collectives._PCIE_MAX_BYTES_PER_S else "nvlink"
    hop = _value(f"NETWORK.hop_{kind}_s") or 0.0
    return hop * collectives._LL_HOP[kind] if ll else hop


def _fill_bytes(coll: list[dict], per_node: int, peak: float | None, gpu: GPU,
                share=lambda n: 1.0) -> float | None:
    """Median over inside-node all-gather / reduce-scatter points of 1 MiB or more that run
    below 90% of the peak of the pipeline fill the Simple protocol's time implies:
    t = fill / B + (n - 1) hops + volume / (B x share(n)), share: the links a group of n
    uses (collectives.scaleup_share; 1 but on a full mesh)."""
    if not peak:
        return None
    out = []
    for c in coll:
        if c["collective"] not in ("all_gather", "reduce_scatter") or c["group"] > per_node:
            continue
        n, t = c["group"], c.get("seconds")
        if not t or c["bytes"] < 2**20 or c["bus_bytes_per_s"] >= 0.9 * peak * share(n):
            continue
        vol = (n - 1) / n * c["bytes"]
        out.append(max(0.0, (t - (n - 1) * _hop_s(gpu)) * peak - vol / share(n)))
    if not out:
        return None
    out.sort()
    return out[len(out) // 2] or None


def _ll_base_s(coll: list[dict], per_node: int, gpu: GPU) -> float | None:
    xs = [c for c in coll if c["collective"] == "all_reduce" and c["group"] <= per_node
          and c.get("seconds") and c["bytes"] <= 2**16]
    if not xs:
        return None
    c = min(xs, key=lambda c: c["bytes"])
    return max(1e-7, c["seconds"] - 2 * (c["group"] - 1) * _hop_s(gpu, ll=True))


def constants_from(measured: dict, gpu: GPU) -> tuple[dict[str, float], list[dict]]:
    """(constants for the profile, one report line per measurement)."""
    gen = gpu.generation or "hopper"
    clock = clock_factor(gpu)
    bf16 = gpu.flops("bf16") * clock
    lines: list[dict] = []

    def put(name: str, value: float | None, what: str) -> None:
        if value is None or not math.isfinite(value) or value <= 0:
            return
        lines.append({"name": name, "default": _value(name), "measured": value, "what": what})

    sweep = measured.get("gemm") or []
    big = [r for r in sweep if r["m"] == r["n"] == r["k"] == BIG]
    if big:
        f = big[0]["flops_per_s"]
        # a part with its own measured fraction (efficiency.SKU_MATMUL) takes it there
        sku = profile._module().SKU_MATMUL.get(gpu.name, {})
        key = (f"SKU_MATMUL.{gpu.name}.bf16" if "bf16" in sku
               else f"EFFICIENCY.{gen}.matmul_bf16")
        put(key, f / bf16,
            f"{BIG}^3 GEMM {f / 1e12:.3g} TFLOP/s of {bf16 / 1e12:.0f} bf16 peak")
    lat = fit_tile_latency(sweep, gpu)
    put(f"EFFICIENCY.{gen}.gemm_tile_latency_s", lat,
        "fixed time per GEMM tile (square-GEMM sweep against the shape model)")
    att = measured.get("attention")
    if att:
        # stored as the generation's head-dim-128 fraction on its reference part, which the
        # cost model scales to other head dims and exponential rates
        # (compute.attention_efficiency; identity for head dim 128 on such a part)
        # and at the 8k-key reference the model scales shorter sequences from
        # (efficiency.ATTN_HALF_SEQ / _BWD; AMD parts ATTN_HALF_SEQ_GENERATION): on NVIDIA
        # parts a timing at 4k keys is ~5% / ~8% below it
        hd, seq = att.get("head_dim", 128), att.get("seq", 8192)
        occ_f = compute.attention_occupancy(seq, False, gen)
        occ_b = compute.attention_occupancy(seq, True, gen)
        put(f"EFFICIENCY.{gen}.attention_fwd",
            compute.reference_attention_fraction(
                gpu, att["fwd_flops_per_s"] / bf16 / occ_f, hd),
            f"causal SDPA forward {att['fwd_flops_per_s'] / 1e12:.3g} TFLOP/s (seq {seq}, "
            f"head dim {hd})")
        put(f"EFFICIENCY.{gen}.attention_bwd",
            compute.reference_attention_fraction(
                gpu, att["bwd_flops_per_s"] / bf16 / occ_b, hd,
                backward=True),
            f"causal SDPA backward {att['bwd_flops_per_s'] / 1e12:.3g} TFLOP/s")
    cp = measured.get("copy")
    if cp:
        put(f"EFFICIENCY.{gen}.memory", cp["bytes_per_s"] / gpu.memory_bytes_per_s,
            f"copy {cp['bytes_per_s'] / 1e9:.3g} GB/s of {gpu.memory_bytes_per_s / 1e9:.0f}")
    coll = [c for c in measured.get("collectives", []) if "bus_bytes_per_s" in c]
    per_node = measured.get("gpus_per_node") or gpu.gpus_per_node
    nic = measured.get("nic_bytes_per_s") or gpu.nic_bytes_per_s

    from ..cost.collectives import scaleup_share
    from ..specs.hardware import Cluster
    node = Cluster(gpu, per_node, per_node)

    def best(name: str, inside: bool) -> float | None:
        """The bus bandwidth of the largest message, inside a node as the whole node's links
        would carry it: a group of a full mesh used only its share (scaleup_share)."""
        xs = [c for c in coll if c["collective"] == name and (c["group"] <= per_node) == inside]
        if not xs:
            return None
        top = max(c["bytes"] for c in xs)  # the largest message: bandwidth, not latency
        return max(c["bus_bytes_per_s"] / (scaleup_share(node, c["group"]) if inside else 1.0)
                   for c in xs if c["bytes"] == top)

    # Scale-up: the ring's bus bandwidth (cost/collectives.py). All-gather and reduce-scatter
    # always run as rings; an all-reduce on an NVLS-capable node ran NVLink SHARP, which the
    # model prices at its generation's NVLS factor (collectives.nvls_name) times the ring.
    ring_in = best("all_gather", True) or best("reduce_scatter", True)
    ar_in = best("all_reduce", True)
    nvls = _nvls(gpu)
    from ..cost.collectives import nvls_name, scaleup_name

    if ring_in:  # (on CDNA3, the Infinity Fabric constant: collectives.scaleup_name)
        put(scaleup_name(gpu.generation), ring_in / gpu.scaleup_bytes_per_s,
            f"all-gather/reduce-scatter bus bandwidth {ring_in / 1e9:.0f} GB/s inside a node")
    elif ar_in:
        nv = (_value(nvls_name(gpu.generation)) or 1.0) if nvls else 1.0
        put(scaleup_name(gpu.generation), ar_in / nv / gpu.scaleup_bytes_per_s,
            f"all-reduce bus bandwidth {ar_in / 1e9:.0f} GB/s inside a node"
            + (" (NVLS: over the model's NVLS factor)" if nvls else ""))
    # The message-size ramp: Simple's pipeline fill (bytes at the ring's bus bandwidth) from the
    # mid-size ring points, and LL's fixed cost from the smallest all-reduce.
    peak = ring_in or (ar_in if not nvls else None)
    fill = _fill_bytes(coll, per_node, peak, gpu, lambda n: scaleup_share(node, n))
    if fill is not None:
        put("NETWORK.simple_fill_bytes", fill,
            f"bus bandwidth ramp inside a node: half the peak at ~{fill / 1e6:.1f} MB moved")
    ll = _ll_base_s(coll, per_node, gpu)
    if ll is not None:
        put("NETWORK.ll_base_s", ll, "smallest all-reduce inside a node, less its hops")
    # Scale-out, as cost/collectives.py prices it: a ring across nodes moves 1/g of each
    # rank's volume over each of the node's g NICs (_ring_stream_s), so at the NIC bound its
    # bus bandwidth is g x NIC x scaleout; an all-to-all of n ranks sends (n - g) / n of each
    # rank's data across, so its bus bandwidth ((n - 1) / n of the algorithm bandwidth) is
    # (n - 1) / (n - g) x NIC x alltoall_scaleout.
    ar_out = best("all_reduce", False)
    if ar_out:
        put("NETWORK.scaleout", ar_out / (per_node * nic),
            f"all-reduce bus bandwidth {ar_out / 1e9:.1f} GB/s across nodes "
            f"({per_node} NICs of {nic / 1e9:.1f} GB/s per node)")
    a2a = [c for c in coll if c["collective"] == "all_to_all" and c["group"] > per_node]
    if a2a:
        top = max(c["bytes"] for c in a2a)
        c = max((c for c in a2a if c["bytes"] == top), key=lambda c: c["bus_bytes_per_s"])
        n = c["group"]
        put("NETWORK.alltoall_scaleout",
            c["bus_bytes_per_s"] * (n - per_node) / (n - 1) / nic,
            f"all-to-all bus bandwidth {c['bus_bytes_per_s'] / 1e9:.1f} GB/s across nodes "
            f"({n} ranks)")
    known = set(profile.known_names())
    consts = {}
    for ln in lines:
        ln["applies"] = ln["name"] in known
        if ln["applies"]:
            consts[ln["name"]] = ln["measured"]
    return consts, lines
