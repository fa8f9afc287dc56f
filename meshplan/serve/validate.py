"""Published serving runs -> simulated predictions -> error table (the serving schema).

Columns (any order; unknown columns ignored; blank = not stated by the source):
id, source, trust (A/B/C as in the training schema; blank: ungraded, counted in the
summary, as validate counts it: runs_csv.counted), engine (vllm, sglang or tensorrt-llm,
optionally followed by a note in parentheses: it picks the scheduler simulated, ENGINES;
any other engine, or a blank, fails the row), engine_version, model (a
meshplan preset or config.json path), model_source, gpu, num_gpus, tp, pp, ep, attn_dp,
weight_dtype, kv_dtype (bf16/fp8), input_len, output_len (a token count, or LO:HI for lengths
drawn uniformly from LO..HI inclusive, as the random dataset of SGLang's bench_serving and
vLLM's benchmark_serving draws them with --random-range-ratio r < 1: SGLang
max(int(L x r), 1)..L, serve/traffic.parse_lengths), chat_template_tokens (tokens the server's
chat template adds to every prompt, which the client's input count leaves out: CHAT_TEMPLATE
below; blank = 0, as for a completions endpoint or an offline run), num_requests, concurrency (closed
loop) or rate_per_s (open loop; ``inf`` = offline, all at once), max_num_seqs,
max_batched_tokens (blank: offline TensorRT-LLM rows take trtllm-bench's own limits,
serve/trtllm_bench.py; vLLM rows ``vllm serve``'s defaults for the GPU,
serve/vllm_serve.py; other rows 2048 and 8192), mixed_chunk (SGLang rows: true when the run
passed --enable-mixed-chunk; blank or false = SGLang's default, prefill batches alone and first,
ServePlan.mixed_chunk), gpu_mem_util,
measured_output_tokens_per_s_per_gpu, measured_ttft_ms,
measured_tpot_ms, latency_stat (mean or median), derivation.

The rows are predicted with the same constants as everything else; nothing is fitted per
row. Engine limits a source does not print take one default for all rows.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..errors import InputError, NoPlanFits, require_choice
from ..runs_csv import (EXTRA_FIELDS, TRUST_GRADES, count, counted, duplicate_ids, flag,
                        measured, number, read_csv, unread_measured_columns)
from ..scenario import make_cluster
from ..specs.catalog.presets import load_model, preset_names
from .simulate import percentile, simulate
from .spec import Pool, ServePlan
from .traffic import Lengths, parse_lengths, synthetic
from .trtllm_bench import engine_settings
from .vllm_serve import serve_limits, vllm_version

REQUIRED = ("id", "model", "gpu", "num_gpus", "tp", "input_len", "output_len",
            "measured_output_tokens_per_s_per_gpu")
MEASURED = ("measured_output_tokens_per_s_per_gpu", "measured_ttft_ms", "measured_tpot_ms")
# Unstated engine limits: offline TensorRT-LLM rows (trtllm-bench throughput) take what
# trtllm-bench derives from the model, the GPUs and the row's lengths (serve/trtllm_bench.py);
# vLLM rows what `vllm serve` defaults to on the row's GPU (serve/vllm_serve.py); every other
# row a large running-request cap and the common 8192-token budget.
DEFAULT_MAX_SEQS = 2048
DEFAULT_MAX_TOKENS = 8192
# a blank gpu_mem_util: 0.9, read with the row's engine's meaning (serve/memory.py), the
# default of both vLLM's --gpu-memory-utilization and TensorRT-LLM's
# free_gpu_memory_fraction (KvCacheConfig, tensorrt_llm/llmapi/llm_args.py: "Default is 90%")
DEFAULT_MEM_UTIL = 0.90
MAX_SIM_REQUESTS = 3000
# The engine column -> the scheduler simulated (spec.SCHEDULERS). Only engines whose
# admission policy is modelled: vLLM V1 and SGLang allocate KV blocks as tokens are computed
# and preempt by recompute; TensorRT-LLM reserves the whole request (GUARANTEED_NO_EVICT).
# Other engines (TGI, LMDeploy, ...) were simulated as vLLM without a word; now refused.
ENGINES = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm", "trtllm": "trtllm",
           "trt-llm": "trtllm", "tensorrt_llm": "trtllm"}
# The chat endpoint renders each request's messages with the model's chat template before it
# tokenizes them, so the engine prefills more tokens than the prompt the client counted: `vllm
# bench serve` sums the dataset's prompt_len into 'Total input tokens' (calculate_metrics in
# vllm/benchmarks/serve.py: total_input += input_requests[i].prompt_len), whichever endpoint it
# calls, and its openai-chat backend sends the prompt as one user message. A row states the
# tokens the template adds in chat_template_tokens (e.g. Qwen's ChatML for one user message with
# the generation prompt: <|im_start|> user \n ... <|im_end|> \n <|im_start|> assistant \n, 8
# tokens, ids 151644 872 198 ... 151645 198 151644 77091 198); they are simulated as prompt tokens.
CHAT_TEMPLATE = "chat_template_tokens"
LATENCY_STATS = ("mean", "median")  # what the simulated TTFT / TPOT are reduced with  # offline rows: steady state is reached well before this


@dataclass
class ServeRow:
    id: str
    trust: str
    model: str
    gpus: str
    plan: str
    load: str
    measured_tps: float | None
    predicted_tps: float | None = None
    measured_ttft_ms: float | None = None
    predicted_ttft_ms: float | None = None
    measured_tpot_ms: float | None = None
    predicted_tpot_ms: float | None = None
    error: str = ""
    # the group the summary reports the row in: the engine simulated (ENGINES' scheduler
    # name) and the GPU's vendor; blank on a row that could not be predicted
    engine: str = ""
    vendor: str = ""

    def err(self, what: str) -> float | None:
        m, p = getattr(self, f"measured_{what}"), getattr(self, f"predicted_{what}")
        if m is None or p is None or m == 0:
            return None
        return (p - m) / m

    def to_json(self) -> dict:
        return asdict(self) | {k + "_error": self.err(k) for k in ("tps", "ttft_ms", "tpot_ms")}


def _checked(r: dict, k: str, read, *args, **kw):
    """A value read by the runs CSV's rules (meshplan/runs_csv.py), its error naming the row."""
    try:
        return read(r, k, *args, **kw)
    except InputError as e:
        raise InputError(f"row {r.get('id')}: {k}", e.value, e.allowed) from None


def _f(r: dict, k: str) -> float | None:
    """A finite number, or None when blank."""
    return _checked(r, k, number)


def _m(r: dict, k: str) -> float | None:
    """A measured value: blank, or a finite positive number."""
    return _checked(r, k, measured)


def _i(r: dict, k: str, default: int | None = None) -> int | None:
    """A whole number >= 1 (a count, a degree, a length), or ``default`` when blank;
    required (blank refused) for the columns every row must state."""
    v = _checked(r, k, count, required=k in REQUIRED, minimum=1)
    return default if v is None else v


def _lengths(r: dict, k: str) -> Lengths:
    """A length column: a token count every request has, or ``LO:HI``, lengths drawn uniformly
    (inclusive) as the benchmark's random dataset drew them (traffic.parse_lengths)."""
    raw = (r.get(k) or "").strip()
    if ":" in raw:
        return _checked(r, k, lambda row, key: parse_lengths(key, raw))
    n = _i(r, k)
    return Lengths(n, n)


def _engine(r: dict, k: str) -> str:
    """The scheduler for the row's engine: its first word ("tensorrt-llm (NIM)" is
    TensorRT-LLM) must name an engine of ENGINES."""
    raw = (r.get(k) or "").strip()
    name = re.split(r"[\s(]", raw.lower(), maxsplit=1)[0]
    if name not in ENGINES:
        raise InputError(k, raw, "the scheduler simulated depends on the engine; allowed: "
                         + ", ".join(ENGINES) + " (optionally followed by a note in parentheses)")
    return ENGINES[name]


def _model(r: dict, base: Path | None):
    """The row's model: a preset, or a config.json whose relative path is read next to the
    CSV that names it (as a scenario file's model.config is, scenario._model_from_table), so
    the same CSV predicts the same rows from any folder; a path that is not there falls back
    to the current folder."""
    name = r["model"]
    p = Path(name.strip())
    if (base is not None and name.strip() and not p.is_absolute()
            and name.strip().lower() not in preset_names() and (base / p).is_file()):
        return load_model(str(base / p))
    return load_model(name)


def predict_row(r: dict, base: Path | None = None) -> ServeRow:
    """One row's prediction; ``base``: the folder of the CSV it came from (relative
    config.json paths in ``model`` are read from there)."""
    if r.get(EXTRA_FIELDS):  # more cells than the header: every value after it is shifted
        raise InputError("row", r.get("id"), r[EXTRA_FIELDS])
    model = _model(r, base)
    n = _i(r, "num_gpus")
    tp, pp = _i(r, "tp", 1), _i(r, "pp", 1)
    dp, ep = _i(r, "attn_dp", 1), _i(r, "ep", 1)
    cluster = make_cluster(f"{n}x{r['gpu']}")
    util = _f(r, "gpu_mem_util")  # (0 was taken as blank: the default, without a word)
    per = tp * pp * dp
    if n % per:
        raise InputError(f"row {r['id']}: num_gpus", n, f"must be a multiple of tp*pp*attn_dp ({per})")
    util = DEFAULT_MEM_UTIL if util is None else util
    sched = _checked(r, "engine", _engine)
    wdtype = (r.get("weight_dtype") or "bf16").strip()
    kvdtype = (r.get("kv_dtype") or r.get("weight_dtype") or "bf16").strip()
    conc = _i(r, "concurrency")
    rate_s = (r.get("rate_per_s") or "").strip().lower()
    if conc and rate_s:  # the closed loop was simulated and the rate dropped without a word
        raise InputError(f"row {r['id']}: rate_per_s", rate_s, f"concurrency is {conc}: give"
                         " concurrency (closed loop) or rate_per_s (open loop), not both")
    rate = math.inf if rate_s in ("inf", "") and not conc else _m(r, "rate_per_s")
    nreq = min(_i(r, "num_requests", 1000), MAX_SIM_REQUESTS)
    il, ol = _lengths(r, "input_len"), _lengths(r, "output_len")
    added = _checked(r, CHAT_TEMPLATE, count) or 0  # (a whole number >= 0; blank: none)
    il = Lengths(il.lo + added, il.hi + added)
    seqs, tokens = _i(r, "max_num_seqs"), _i(r, "max_batched_tokens")
    if sched == "vllm":  # the server's own defaults for what the source does not print,
        # by the GPU (EngineArgs.get_batch_defaults; serve/vllm_serve.py), not 2048 / 8192
        limits = serve_limits(cluster.gpu, seqs, tokens, vllm_version(r.get("engine_version")))
    else:
        limits = (seqs or DEFAULT_MAX_SEQS, tokens or DEFAULT_MAX_TOKENS)
    pool = Pool(tp=tp, pp=pp, ep=ep, attn_dp=dp, replicas=n // per, max_num_seqs=limits[0],
                max_batched_tokens=limits[1], gpu_mem_util=util)
    # blank: the engine's default; only SGLang's is not to mix (ServePlan.mixed_chunk)
    mixed = _checked(r, "mixed_chunk", flag)
    mixed = sched != "sglang" if mixed is None else mixed
    plan = ServePlan((pool,), wdtype, kvdtype, scheduler=sched,  # (checks the dtypes)
                     mixed_chunk=mixed)
    if sched == "trtllm" and rate == math.inf and not (seqs and tokens):
        # TensorRT-LLM offline = trtllm-bench throughput: its own limits (serve/trtllm_bench.py),
        # --tp counting the attention-DP ranks (tp 8 with enable_attention_dp)
        # (trtllm-bench sizes the engine from the dataset's average lengths)
        bench = engine_settings(model, cluster.gpu, tp * dp, pp, round(il.mean), round(ol.mean),
                                util, wdtype, kvdtype)
        plan = plan.with_pools(replace(pool, max_num_seqs=seqs or bench[0],
                                       max_batched_tokens=tokens or bench[1]))
    traffic = synthetic(nreq, il, ol, rate_per_s=None if conc else rate,
                        concurrency=conc)
    row = ServeRow(r["id"], r.get("trust", ""), r["model"], f"{n}x{r['gpu']}", plan.describe(),
                   f"concurrency {conc}" if conc else f"rate {rate:g}/s", _m(r, "measured_output_tokens_per_s_per_gpu"),
                   measured_ttft_ms=_m(r, "measured_ttft_ms"), measured_tpot_ms=_m(r, "measured_tpot_ms"))
    # blank: the mean; another statistic (p99) was compared as the mean without a word
    stat = _checked(r, "latency_stat", lambda row, k: require_choice(
        k, (row.get(k) or "mean").strip(), LATENCY_STATS))
    res = simulate(model, cluster, plan, traffic)
    row.engine, row.vendor = sched, cluster.gpu.vendor

    # closed loop: the first wave (all clients starting at once) is the benchmark's warm-up
    skip = conc or 0

    def agg(xs: list[float]) -> float:
        xs = xs[skip:] if len(xs) > 2 * skip else xs
        return percentile(xs, 50) if stat == "median" else sum(xs) / len(xs)

    row.predicted_tps = res.output_tokens_per_s_per_gpu()
    row.predicted_ttft_ms = agg(res.ttft_s) * 1e3
    row.predicted_tpot_ms = agg(res.tpot_s) * 1e3 if res.tpot_s else None
    return row


def load_rows(path: str | Path) -> list[dict]:
    return _load(path)[1]


def _load(path: str | Path) -> tuple[list[str], list[dict]]:
    """(header, rows) of a serving CSV."""
    header, rows = read_csv(path)
    if not rows:
        raise InputError("csv", str(path), "no rows")
    missing = [c for c in REQUIRED if c not in rows[0]]
    if missing:
        raise InputError("csv", str(path), "not a serving CSV; missing columns: " + ", ".join(missing))
    return header, rows


def validate_serving(path: str | Path, trust: str = "AB") -> tuple[list[ServeRow], dict]:
    trust = str(trust or "").strip().upper()
    if not trust or any(t not in TRUST_GRADES for t in trust):  # else an empty summary
        raise InputError("--trust", trust, "one or more of the grades A, B, C (e.g. AB)")
    out = []
    base = Path(path).resolve().parent
    header, rows = _load(path)
    for r in rows:
        try:
            out.append(predict_row(r, base))
        except (InputError, NoPlanFits) as e:
            # every row's error names its row (the plan's and the catalogs' checks do not)
            msg = str(e) if str(e).startswith("row ") else f"row {r.get('id', '?')}: {e}"
            out.append(ServeRow(r.get("id", "?"), r.get("trust", ""), r.get("model", ""),
                                f"{r.get('num_gpus')}x{r.get('gpu')}", "", "", None, error=msg))
    summary = {"rows": len(out), "errors": sum(1 for x in out if x.error)}
    # what the training validate reports too: ids several rows share, and columns that look
    # like a misspelt measured one (unknown columns are ignored: "measured_ttft_s" would
    # leave every TTFT unscored without a word)
    summary["duplicate_ids"] = duplicate_ids(x.id for x in out)
    summary["columns_not_read"] = [{"column": c, "did_you_mean": m}
                                   for c, m in unread_measured_columns(header, MEASURED)]
    summary |= _errors(out, trust)
    # the same figures by engine and by GPU vendor: one error over engines that run the same
    # kernels at different speeds hides which one is off (trust-graded rows only)
    summary["by_group"] = {
        f"{what} {name}": _errors([x for x in out if getattr(x, what) == name], trust)
        for what in ("engine", "vendor")
        for name in sorted({getattr(x, what) for x in out if getattr(x, what)})}
    return out, summary


def _errors(rows: list[ServeRow], trust: str) -> dict:
    """Per metric: rows, median and 90th percentile of |error|, median signed error."""
    out = {}
    for k in ("tps", "ttft_ms", "tpot_ms"):
        signed = sorted(e for x in rows if counted(x.trust, trust) and (e := x.err(k)) is not None)
        errs = sorted(abs(e) for e in signed)
        out[k] = {"n": len(errs), "median_abs_error": percentile(errs, 50) if errs else None,
                  "p90_abs_error": percentile(errs, 90) if errs else None,
                  "median_signed_error": percentile(signed, 50) if signed else None}
    return out
