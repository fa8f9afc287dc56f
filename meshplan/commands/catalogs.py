"""``meshplan models`` and ``meshplan gpus``: the built-in catalogs."""

from __future__ import annotations

import json

from ..scenario import gpu_catalog
from ..specs.prices import catalog_prices, parse_price_overrides, price_of
from ..specs.catalog.presets import preset, preset_names


def _models(args) -> int:
    rows = []
    for n in preset_names():
        m = preset(n)
        rows.append({"name": n, "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
                     "kv_heads": m.kv_heads, "attention": m.attention,
                     "experts": m.moe_experts, "topk": m.moe_topk,
                     "total_params": m.total_params(), "active_params": m.active_params()})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'preset':<18}{'layers':>7}{'hidden':>8}{'heads':>7}{'kv':>5} {'attn':<5}"
          f"{'experts':>9}{'total':>10}{'active':>10}")
    for r in rows:
        e = f"{r['experts']}/top{r['topk']}" if r["experts"] else "-"
        print(f"{r['name']:<18}{r['layers']:>7}{r['hidden']:>8}{r['heads']:>7}{r['kv_heads']:>5} "
              f"{r['attention']:<5}{e:>9}{r['total_params'] / 1e9:>9.2f}B"
              f"{r['active_params'] / 1e9:>9.2f}B")
    return 0


def _gpus(args) -> int:
    cat = gpu_catalog(args.gpu_file)
    overrides = parse_price_overrides(args.price, cat)
    known = catalog_prices()

    def price(name: str) -> dict:
        if name not in overrides and name not in known:
            return {"usd_per_gpu_hour": None, "price_source": "", "price_date": "",
                    "price_is_estimate": False}
        p = price_of(name, overrides)
        return {"usd_per_gpu_hour": p.usd_per_gpu_hour, "price_source": f"{p.provider}: {p.source}",
                "price_date": p.date, "price_is_estimate": p.estimate}

    rows = [{"name": g.name, "bf16_tflops": g.flops("bf16") / 1e12,
             "fp8_tflops": g.flops("fp8") / 1e12, "memory_gib": g.memory_bytes / 2**30,
             "memory_tb_per_s": g.memory_bytes_per_s / 1e12,
             "scaleup_gb_per_s_each_way": g.scaleup_bytes_per_s / 1e9,
             "gpus_per_node": g.gpus_per_node, "scaleup_domain": g.scaleup_domain,
             "nic_gbps_per_gpu": g.nic_bytes_per_s * 8 / 1e9, "source": g.source}
            | price(g.name) for g in cat.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'gpu':<20}{'bf16 TF':>9}{'fp8 TF':>9}{'mem GiB':>9}{'HBM TB/s':>9}"
          f"{'NVL GB/s':>9}{'node':>6}{'domain':>7}{'NIC Gb/s':>9}{'$/GPU-h':>9}  price read")
    for r in rows:
        print(f"{r['name']:<20}{r['bf16_tflops']:>9.0f}{r['fp8_tflops']:>9.0f}"
              f"{r['memory_gib']:>9.0f}{r['memory_tb_per_s']:>9.2f}"
              f"{r['scaleup_gb_per_s_each_way']:>9.0f}{r['gpus_per_node']:>6}"
              f"{r['scaleup_domain']:>7}{r['nic_gbps_per_gpu']:>9.0f}"
              + (f"{r['usd_per_gpu_hour']:>9.2f}  {r['price_date']}"
                 + (" estimate" if r["price_is_estimate"] else "")
                 if r["usd_per_gpu_hour"] is not None else f"{'-':>9}"))
    print("prices: on-demand list $/GPU-hour; sources in meshplan/specs/catalog/prices.toml "
          "(--json shows them); override with --price GPU=USD")
    return 0


def register(sub) -> None:
    p = sub.add_parser("models", help="list the model presets")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_models)
    p = sub.add_parser("gpus", help="list the GPU catalog")
    p.add_argument("--json", action="store_true")
    p.add_argument("--gpu-file", help="TOML file with extra [gpu.NAME] tables")
    p.add_argument("--price", action="append", metavar="GPU=USD",
                   help="$/GPU-hour for a GPU type, overriding the catalog (repeatable)")
    p.set_defaults(func=_gpus)
