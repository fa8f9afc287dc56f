"""Pictures of a simulated step (matplotlib, Agg backend, imported only when drawing).

- ``schedule_png``: the timeline, pipeline ranks as rows (rank 0 on top), time left to
  right; forward, backward (full or input-only), weight-gradient, overlapped F&B and
  point-to-point sends in distinct colours, idle time left blank; micro-batch numbers in
  the boxes when they are wide enough; later chunks of a rank drawn darker.
- ``memory_png``: stashed activations per pipeline rank (stage) over the step.
"""

from __future__ import annotations

import io
from pathlib import Path

from ..errors import InputError
from ..pipeline.simulate import SimResult
from .trace import atomic_write

COLORS = {"F": "#4C72B0", "B": "#55A868", "I": "#8FD19E", "W": "#E08A3C",
          "OVERLAP_F_B": "#8172B2", "p2p": "#9A9A9A", "dp": "#C44E52"}
LABELS = {"F": "forward", "B": "backward (full)", "I": "backward (inputs)",
          "W": "backward (weights)", "OVERLAP_F_B": "forward + backward overlapped",
          "p2p": "p2p send", "dp": "data-parallel comm"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("png", "matplotlib", "drawing needs matplotlib: "
                         "pip install 'meshplan[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _shade(hex_color: str, level: int, levels: int) -> tuple[float, float, float]:
    """Darken ``hex_color`` for later local chunks (level 0 = as is)."""
    r, g, b = (int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    k = 1.0 - 0.45 * (level / max(1, levels - 1)) if levels > 1 else 1.0
    return (r * k, g * k, b * k)


def _save(fig, path: str | Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")
    p = Path(path)
    atomic_write(p, buf.getvalue())
    return p


def schedule_png(res: SimResult, path: str | Path, title: str = "",
                 max_labels: int = 600) -> Path:
    """Draw the timeline of ``res`` into ``path`` (PNG)."""
    plt = _pyplot()
    from matplotlib.patches import Patch

    sched = res.schedule
    pp = sched.pp
    scale, unit = (1e3, "ms") if res.step_time_s < 10 else (1.0, "s")
    width = min(24.0, max(10.0, 0.25 * max(len(o) for o in sched.order.values())))
    fig, ax = plt.subplots(figsize=(width, 1.4 + 0.6 * pp), dpi=110)
    used: set[str] = set()
    n_labels = sum(len(o) for o in sched.order.values())
    for r in range(pp):
        y = pp - 1 - r
        local = {s: j for j, s in enumerate(sched.rank_stages(r))}
        bars: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for a, st, en in zip(sched.order[r], res.starts[r], res.ends[r]):
            level = local.get(a.leaves()[0].stage, 0)
            bars.setdefault((a.kind, level), []).append((st * scale, (en - st) * scale))
            if n_labels <= max_labels and a.sub is None:
                ax.text((st + en) / 2 * scale, y + 0.3, str(a.mb), ha="center", va="center",
                        fontsize=6, color="white")
            elif n_labels <= max_labels:
                ax.text((st + en) / 2 * scale, y + 0.3, f"{a.sub[0].mb}|{a.sub[1].mb}",
                        ha="center", va="center", fontsize=5, color="white")
        for (kind, level), segs in bars.items():
            ax.broken_barh(segs, (y + 0.05, 0.5), facecolors=_shade(COLORS[kind], level,
                                                                    sched.vpp),
                           edgecolor="white", linewidth=0.3)
            used.add(kind)
    sends: dict[int, list[tuple[float, float]]] = {}
    for src, _dst, _s, _mb, _d, st, en in res.transfers:
        sends.setdefault(src, []).append((st * scale, max((en - st) * scale, 1e-9)))
    for src, segs in sends.items():
        ax.broken_barh(segs, (pp - 1 - src - 0.3, 0.25), facecolors=COLORS["p2p"], alpha=0.7)
        used.add("p2p")
    dp: dict[int, list[tuple[float, float]]] = {}
    for r, _what, _s, st, en in res.dp_events:
        dp.setdefault(r, []).append((st * scale, (en - st) * scale))
    for r, segs in dp.items():
        ax.broken_barh(segs, (pp - 1 - r - 0.4, 0.1), facecolors=COLORS["dp"])
        used.add("dp")
    ax.set_yticks([pp - 1 - r + 0.3 for r in range(pp)])
    ax.set_yticklabels([f"rank {r}" for r in range(pp)])
    ax.set_ylim(-0.5, pp)
    ax.set_xlim(0, res.step_time_s * scale)
    ax.set_xlabel(f"time ({unit}); blank = idle")
    ax.grid(axis="x", alpha=0.3)
    head = (f"{sched.name}  pp={pp} vpp={sched.vpp} m={sched.num_microbatches}  "
            f"step {res.step_time_s * scale:,.1f} {unit}, mean idle {res.bubble_fraction:.1%}")
    ax.set_title(f"{title}\n{head}" if title else head, fontsize=10)
    handles = [Patch(color=COLORS[k], label=LABELS[k]) for k in COLORS if k in used]
    if sched.vpp > 1:
        handles.append(Patch(color=_shade("#808080", sched.vpp - 1, sched.vpp),
                             label="darker = later chunk on the rank"))
    ax.legend(handles=handles, loc="upper center",
              bbox_to_anchor=(0.5, -0.35 if pp <= 4 else -0.9 / pp - 0.1),
              ncol=min(4, len(handles)), fontsize=8, frameon=False)
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def memory_png(res: SimResult, path: str | Path, title: str = "") -> Path:
    """Stashed activation bytes of every pipeline rank over the step (PNG)."""
    plt = _pyplot()
    sched = res.schedule
    scale, unit = (1e3, "ms") if res.step_time_s < 10 else (1.0, "s")
    peak = max((r.peak_act_bytes for r in res.ranks), default=0.0)
    div, bunit = (2**30, "GiB") if peak >= 2**28 else (2**20, "MiB") if peak >= 2**18 else (1, "bytes")
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    cmap = plt.get_cmap("viridis")
    for r in range(sched.pp):
        tl = res.memory_timeline(r)
        xs = [t * scale for t, _ in tl] + [res.step_time_s * scale]
        ys = [b / div for _, b in tl] + [tl[-1][1] / div]
        ax.step(xs, ys, where="post", color=cmap(r / max(1, sched.pp - 1)),
                label=f"rank {r} (peak {res.ranks[r].peak_act_bytes / div:.3g} {bunit})",
                linewidth=1.2)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel(f"stashed activations ({bunit})")
    head = (f"{sched.name}  pp={sched.pp} vpp={sched.vpp} m={sched.num_microbatches}: "
            "activation memory per pipeline rank")
    ax.set_title(f"{title}\n{head}" if title else head, fontsize=10)
    ax.grid(alpha=0.3)
    if sched.pp <= 16:
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
