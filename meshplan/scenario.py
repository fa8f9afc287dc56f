"""A scenario: model x cluster x workload (and optionally a plan), from a TOML file or flags.

    [model]      preset = "llama3.1-70b"   # or config = "path/to/config.json", or inline fields
    [cluster]    gpus = "64xH100-SXM-80GB"  # or gpu = "...", num_gpus = 64
                 gpus_per_node = 8          # optional overrides
                 nic_gbps_per_gpu = 400
                 gpu_file = "my_gpus.toml"  # optional extra GPU types
                 # or several pools (meshplan plan only):
                 # pools = [{gpus = "64xH100-SXM-80GB", price = 2.49},
                 #          {gpus = "256xA100-SXM-80GB", nic_gbps_per_gpu = 200}]
                 # inter_pool_gbps = 100     # link between pools, per GPU (default: slowest NIC)
    [workload]   seq_len = 8192
                 global_batch = 512         # sequences (or global_batch_tokens = ...)
                 precision = "bf16"
    [plan]       tensor_parallel = 8 ...    # optional; long or short names (see plan.ALIASES)

Relative paths are read relative to the TOML file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from .errors import InputError, require_positive_int, require_positive_number
from .inputs import read_input
from .plan import ALIASES, PLAN_INT_FIELDS, Plan
from .specs.catalog.gpus import GPUS
from .specs.catalog.presets import load_model
from .specs.hardware import GPU, Cluster, load_gpu_toml, lookup_gpu, parse_gpus
from .specs.model import ModelSpec
from .specs.pools import Pool, PoolCluster, parse_pools
from .specs.prices import check_usd, price_of
from .specs.workload import Workload


@dataclass(frozen=True)
class Scenario:
    model: ModelSpec
    cluster: Cluster
    workload: Workload
    plan: Plan | None = None
    pools: PoolCluster | None = None  # set when the cluster was given as pools (plan only)
    # the plan fields the [plan] table names (short names); the others are at Plan's defaults.
    # Provenance, not content: two scenarios with the same plan are equal however it was given
    plan_stated: frozenset = field(default=frozenset(), compare=False)
    # the calibration profile (meshplan calibrate) the scenario file names at its top
    # (``profile = "my_cluster.toml"``, what `--export meshplan` writes when a profile is in
    # use); the commands apply it unless --profile names one (commands/_profile.py)
    profile: str = field(default="", compare=False)
    # the [cluster] table as make_cluster takes it (gpu_file resolved against the file), so
    # a flag given on top (--gpus-per-node, --gpus, --nic-gbps) replaces what it names and
    # keeps the rest (NIC, scale-up domain, the file's own GPU types). Provenance, as above
    cluster_stated: tuple = field(default=(), compare=False)

    def __post_init__(self) -> None:
        # FP8 training needs FP8 tensor cores on every GPU that runs it (Hopper, Ada,
        # Blackwell, CDNA3 and newer: a catalog peak at fp8); elsewhere it is not a slower
        # FP8 but no FP8 at all, so it is refused rather than priced as 16-bit
        if self.cluster is None and self.pools is None:  # `meshplan run` on local devices
            return
        if self.pools is None:
            check_precision(self.workload.precision, [self.cluster.gpu])
        elif self.workload.precision == "fp8":
            check_precision("fp8", [p.gpu for p in self.pools.pools])


def check_precision(precision: str, gpus) -> None:
    """Refuse a precision the GPUs have no tensor cores for (bf16 before Ampere, fp8 before
    Hopper / Ada / CDNA3): not a slower run but none at all (InputError, field precision)."""
    for g in gpus:
        if precision == "bf16" and "bf16" not in g.peak_flops:
            raise InputError("precision", "bf16", f"{g.name} ({g.generation}) has no bf16 "
                             "tensor cores (Ampere and newer do); use fp16")
        if precision == "fp8" and "fp8" not in g.peak_flops:
            raise InputError("precision", "fp8", f"{g.name} ({g.generation}) has no FP8 "
                             "tensor cores (Hopper, Ada, Blackwell, CDNA3 and newer "
                             "do); use bf16 or fp16")


def gpu_catalog(gpu_file: str | Path | None = None) -> dict[str, GPU]:
    cat = dict(GPUS)
    if gpu_file:
        cat.update(load_gpu_toml(gpu_file))
    return cat


def make_cluster(gpus: str | None = None, gpu: str | None = None, num_gpus: int | None = None,
                 gpus_per_node: int | None = None, nic_gbps_per_gpu: float | None = None,
                 scaleup_domain: int | None = None, gpu_file: str | Path | None = None) -> Cluster:
    cat = gpu_catalog(gpu_file)
    if isinstance(gpus, str) and "+" in gpus:  # (not text: parse_gpus refuses it)
        parse_pools(gpus, cat)  # a malformed pool string is reported as such
        raise InputError("gpus", gpus, "several pools (A+B) are planned by `meshplan plan`; "
                         "this command takes one GPU type")
    if gpus:
        n, g = parse_gpus(gpus, cat)
        if num_gpus is not None and num_gpus != n:
            raise InputError("num_gpus", num_gpus, f"contradicts gpus {gpus!r} ({n} GPUs); "
                             "give one of them")
        if gpu is not None and lookup_gpu(gpu, cat) is not g:
            raise InputError("gpu", gpu, f"contradicts gpus {gpus!r}; give one of them")
    elif gpu and num_gpus is not None:
        n, g = num_gpus, lookup_gpu(gpu, cat)
    else:
        raise InputError("gpus", gpus, "give COUNTxGPU, e.g. 64xH100-SXM-80GB")
    if gpus_per_node is not None:
        gpus_per_node = require_positive_int("gpus_per_node", gpus_per_node)
    if scaleup_domain is not None:
        scaleup_domain = require_positive_int("scaleup_domain", scaleup_domain)
    if num_gpus is not None and not gpus:
        n = require_positive_int("num_gpus", num_gpus)
    nic = 0.0
    if nic_gbps_per_gpu is not None:
        nic = require_positive_number("nic_gbps_per_gpu", nic_gbps_per_gpu) / 8 * 1e9
    return Cluster(g, n, gpus_per_node=gpus_per_node or 0, nic_bytes_per_s=nic,
                   scaleup_domain=scaleup_domain or 0)


def pool_cluster_args(t: dict, gpus_per_node: int | None, nic_gbps_per_gpu: float | None,
                      gpu_file: str | Path | None) -> dict:
    """make_cluster's arguments for one pool table: the pool's own keys, else the node size
    and NIC given for every pool (price is the pool's, not its cluster's)."""
    args = {"gpus": str(t["gpus"]), "gpus_per_node": t.get("gpus_per_node", gpus_per_node),
            "nic_gbps_per_gpu": t.get("nic_gbps_per_gpu", nic_gbps_per_gpu),
            "scaleup_domain": t.get("scaleup_domain"), "gpu_file": gpu_file}
    return {k: v for k, v in args.items() if v is not None}


def make_pools(gpus: str, gpus_per_node: int | None = None,
               nic_gbps_per_gpu: float | None = None, gpu_file: str | Path | None = None,
               inter_pool_gbps: float | None = None, prices: dict[str, float] | None = None,
               pool_tables: list[dict] | None = None) -> PoolCluster:
    """A cluster of pools from ``A+B+...`` (or the scenario's pool tables). Node size and
    NIC flags apply to every pool; a pool table's own keys apply to that pool."""
    cat = gpu_catalog(gpu_file)
    tables = pool_tables if pool_tables is not None else [
        {"gpus": f"{n}x{g.name}"} for n, g in parse_pools(gpus, cat)]
    pools = []
    for i, t in enumerate(tables):
        if not isinstance(t, dict) or "gpus" not in t:
            raise InputError(f"cluster.pools[{i}]", t, "each pool needs gpus = \"COUNTxGPU\"")
        allowed = {"gpus", "gpus_per_node", "nic_gbps_per_gpu", "scaleup_domain", "price"}
        for k in t:
            if k not in allowed:
                raise InputError(f"cluster.pools[{i}].{k}", t[k], "allowed: " + ", ".join(sorted(allowed)))
        if "+" in str(t["gpus"]):
            raise InputError(f"cluster.pools[{i}].gpus", t["gpus"], "one COUNTxGPU per pool")
        c = make_cluster(**pool_cluster_args(t, gpus_per_node, nic_gbps_per_gpu, gpu_file))
        if "price" in t:
            own = {c.gpu.name: check_usd(f"cluster.pools[{i}].price", t["price"])}
        else:
            own = prices
        pools.append(Pool(c, price_of(c.gpu.name, own)))
    link = 0.0
    if inter_pool_gbps is not None:  # a number (a TOML "100" is text, as for seq_len)
        link = require_positive_number("inter_pool_gbps", inter_pool_gbps) / 8 * 1e9
    return PoolCluster(tuple(pools), link)


def _model_from_table(t: dict, base: Path) -> ModelSpec:
    named = [k for k in ("preset", "config") if k in t]
    if named and len(t) > 1:  # a named model is whole: other keys would be ignored
        k = next(k for k in t if k != named[0])
        raise InputError(f"model.{k}", t[k], f"with model.{named[0]} no other key is allowed "
                         "(give preset, or config, or the inline fields)")
    if "preset" in t:
        return load_model(str(t["preset"]))
    if "config" in t:
        if not isinstance(t["config"], str) or not t["config"].strip():
            raise InputError("model.config", t["config"], "a path to a config.json (a string)")
        p = Path(t["config"])
        return load_model(str(p if p.is_absolute() else base / p))
    known = {f.name for f in fields(ModelSpec)}
    bad = [k for k in t if k not in known]
    if bad:
        raise InputError(f"model.{bad[0]}", t[bad[0]], "unknown model field")
    try:
        return ModelSpec(**t)
    except TypeError as e:
        raise InputError("model", t, f"incomplete inline model ({e})") from None


SCENARIO_TABLES = ("model", "cluster", "workload", "plan")


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        data = tomllib.loads(read_input(p, "scenario").decode("utf-8").removeprefix("\ufeff"))
    except IsADirectoryError:
        raise InputError("scenario", str(path), "is a directory; give a TOML file") from None
    except OSError as e:
        raise InputError("scenario", str(path), f"cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise InputError("scenario", str(path), "not a text file (not UTF-8)") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError("scenario", str(path), f"not valid TOML ({e})") from None
    for sec in ("model", "cluster", "workload"):
        if not isinstance(data.get(sec), dict):
            raise InputError("scenario", str(path), f"needs a [{sec}] table")
    prof = data.pop("profile", "")  # the calibration profile the plan was made with
    if not isinstance(prof, str):
        raise InputError("profile", prof, "a path to a calibration profile TOML (a string)")
    if prof and not Path(prof).is_absolute():
        prof = str(p.parent / prof)
    for sec in data:  # a misspelt table would be ignored: [plans] for [plan]
        if sec not in SCENARIO_TABLES:
            raise InputError(f"[{sec}]", data[sec] if not isinstance(data[sec], dict) else "",
                             "unknown table; a scenario has " + ", ".join(
                                 f"[{t}]" for t in SCENARIO_TABLES))
        if not isinstance(data[sec], dict):  # `plan = 5` at the top was taken as no plan
            raise InputError(sec, data[sec], f"must be a [{sec}] table")
    base = p.parent
    model = _model_from_table(data["model"], base)
    c = dict(data["cluster"])
    gf = c.pop("gpu_file", None)
    if gf is not None and (not isinstance(gf, str) or not gf.strip()):
        raise InputError("cluster.gpu_file", gf, "a path to a GPU TOML file (a string)")
    if gf and not Path(gf).is_absolute():
        gf = base / gf
    pools = None
    if "pools" in c:
        tables = c.pop("pools")
        if not isinstance(tables, list) or not tables:
            raise InputError("cluster.pools", tables, "a list of pool tables [{gpus = ...}, ...]")
        per_node, nic = c.pop("gpus_per_node", None), c.pop("nic_gbps_per_gpu", None)
        pools = make_pools("", per_node, nic, gf, c.pop("inter_pool_gbps", None),
                           pool_tables=tables)
        if c:
            k = next(iter(c))
            raise InputError(f"cluster.{k}", c[k], "with pools allowed: pools, gpus_per_node, "
                             "nic_gbps_per_gpu, inter_pool_gbps, gpu_file")
    allowed = {"gpus", "gpu", "num_gpus", "gpus_per_node", "nic_gbps_per_gpu", "scaleup_domain"}
    for k in c:
        if k not in allowed:
            raise InputError(f"cluster.{k}", c[k], "allowed: " + ", ".join(sorted(allowed)))
    cluster = pools.pools[0].cluster if pools else make_cluster(gpu_file=gf, **c)
    if pools is None:
        stated = {**c, "gpu_file": gf}
    elif len(pools.pools) == 1:  # one pool is an ordinary cluster: its table, as stated
        stated = pool_cluster_args(tables[0], per_node, nic, gf)
    else:  # (--gpus replaces the pools: what was given for every pool still holds)
        stated = {k: v for k, v in (("gpus_per_node", per_node), ("nic_gbps_per_gpu", nic),
                                    ("gpu_file", gf)) if v is not None}
    cluster_stated = tuple(sorted(stated.items(), key=lambda kv: kv[0]))
    w = dict(data["workload"])
    known = {f.name for f in fields(Workload)} | {"global_batch_tokens"}
    for k, v in w.items():
        if k not in known:
            raise InputError(f"workload.{k}", v, "unknown key; allowed: " + ", ".join(sorted(known)))
        if k in ("seq_len", "global_batch", "global_batch_tokens") and (
                isinstance(v, bool) or not isinstance(v, int)):
            raise InputError(f"workload.{k}", v, "must be a TOML integer (8192, not \"8192\")")
    if "global_batch_tokens" in w:
        tokens = w.pop("global_batch_tokens")
        seq = w.pop("seq_len", 0)
        gb = w.pop("global_batch", None)
        workload = Workload.from_tokens(seq, tokens, **w)
        if gb is not None and gb != workload.global_batch:  # both given: they must agree
            raise InputError("workload.global_batch_tokens", tokens,
                             f"contradicts global_batch {gb} (x seq_len {seq} = {gb * seq} "
                             "tokens); give one of them")
    else:
        try:
            workload = Workload(**w)
        except TypeError as e:
            raise InputError("workload", w, f"needs seq_len and global_batch ({e})") from None
    if isinstance(data.get("plan"), dict):
        for k, v in data["plan"].items():  # 3.0 is not a degree, as 4096.0 is not a seq_len
            if ALIASES.get(k, k) in PLAN_INT_FIELDS and isinstance(v, (float, str)):
                raise InputError(f"plan.{k}", v, "must be a TOML integer (3, not 3.0 or "
                                 "\"3\")")
    plan = Plan.from_dict(data["plan"]) if isinstance(data.get("plan"), dict) else None
    stated = frozenset(ALIASES.get(k, k) for k in data["plan"]) if plan else frozenset()
    return Scenario(model, cluster, workload, plan, pools, stated, prof, cluster_stated)
