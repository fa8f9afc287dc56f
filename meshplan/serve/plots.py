"""The Pareto front of a serving search as a PNG: output tokens/s per GPU against tokens/s
per user, every simulated plan as a point (aggregated and disaggregated in two colours,
plans meeting the SLO filled), the front as a line."""

from __future__ import annotations

import io

from ..export.plots import _pyplot
from .search import SearchResult


def pareto_png_bytes(res: SearchResult) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=110)
    for dis, color, label in ((False, "#4C72B0", "aggregated"), (True, "#DD8452", "disaggregated")):
        pts = [c for c in res.ranked if c.plan.disaggregated == dis]
        for met in (True, False):
            sel = [c for c in pts if c.meets(res.slo) == met]
            if sel:
                ax.scatter([c.result.tokens_per_s_per_user() for c in sel],
                           [c.result.output_tokens_per_s_per_gpu() for c in sel], s=36,
                           color=color if met else "none", edgecolors=color,
                           label=f"{label} ({'meets' if met else 'misses'} SLO)")
    if res.front:
        ax.plot([c.result.tokens_per_s_per_user() for c in res.front],
                [c.result.output_tokens_per_s_per_gpu() for c in res.front], color="#555555",
                lw=1, ls="--", label="Pareto front")
    ax.set_xlabel("tokens/s per user (1 / mean TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"serving plans ({res.slo.describe()})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
