"""The walk over the plan space that search() runs: best first, branch and bound.

Every (degree point, micro-batch) pair gets a cheap floor on the step time of all its plans
(bound.py, Theorem B2) and waits in a priority queue. The walk takes the pair with the
lowest floor, replaces it by a tighter one and puts it back, three times: its schedule rows'
pipeline floors (Theorem B3), then plus each row's least data-parallel exposure, then each
row's rung floors (Theorems B1 and M, and B4 for rule 6's partial recomputation); no
estimate is needed for any of them. The fourth time, it searches the pair as search.py's
rules 1-3, 5 and 6 say, skipping every row and every ladder rung whose floor is slower than
the k-th best step time found so far (Theorems B1 and B4). Once the lowest
floor in the queue is slower than that, everything left is bounded (the k-th best only
gets faster), and the walk stops. Each pair is counted once, under the reason it was
rejected, so `considered` is the size of the space whatever was pruned.

Same result as walking every point in order: a plan is skipped only when a floor on its
step time exceeds the k-th best step time of plans found, so it cannot be among the k best;
the list of plans found is sorted by (step time, memory, place in the enumeration order),
which is the order the plain walk's stable sort gives, ties included.
"""

from __future__ import annotations

import heapq
from collections import Counter
from math import inf

from ..cost import estimate
from ..engines import plan_violations
from ..errors import InputError
from ..pipeline.schedules import no_gc, rounds_fit
from ..plan import Plan
from .bound import Bounds, layout_plan
from .partial_recompute import partial_fits
from .space import micro_batch_choices, rung_fields, schedule_choices

NOT_FIT = "does not fit in GPU memory"
DOMINATED_SCHEDULE = ("dominated schedule (its zero-bubble variant holds the same memory "
                      "with a smaller bubble)")
ROUNDS = ("micro-batch count the schedule cannot run (torch's interleaving needs a multiple "
          "of max(1, m // pp))")
BOUNDED = "bounded (a lower bound on its step time is slower than the best plans found)"
DOMINATED = "dominated (a lower ZeRO stage or less recomputation already fits)"
DOMINATED_PARTIAL = "dominated (fewer layers recomputed already fit)"


class Walk:
    """State of one search's walk: plans found, the k best step times, counts."""

    def __init__(self, model, cluster, workload, pins: dict, zeros: list, rcs: list,
                 keep: int, engine, rejected: Counter, runs_on_engine, base_fields,
                 schedule_dominated, in_flight_rank0, partial: bool = False,
                 modules: tuple = ()):
        self.model, self.cluster, self.workload = model, cluster, workload
        self.pins, self.zeros, self.rcs, self.keep = pins, zeros, rcs, keep
        self.engine, self.rejected, self.runs_on_engine = engine, rejected, runs_on_engine
        self.base_fields = base_fields
        self.schedule_dominated, self.in_flight_rank0 = schedule_dominated, in_flight_rank0
        self.partial = partial  # search.py's rule 6: try the partial-recomputation ladder
        self.modules = list(modules)  # search.py's rule 7: the module ladder's rungs
        self.ladder = len(zeros) * (len(rcs) + len(self.modules))
        scheds = pins.get("schedules") or ([pins["schedule"]] if "schedule" in pins else None)
        self.bounds = Bounds(model, cluster, workload, zeros,
                             dualpipe=scheds is None or "dualpipev" in scheds,
                             modules=pins.get("recompute_modules", ""))
        self.fits: list = []  # (step time, peak memory, enumeration key, plan)
        self.best: list[float] = []  # max-heap (negated) of the `keep` best step times
        self.considered = self.evaluated = self.fitting = 0
        self.partial_considered = 0  # rule 6's tries (also in `considered`)
        # the leanest plan that did not fit: of those the engine runs (what "no plan fits"
        # shows), and of all (whether a pinned knob is one the engine refuses anyway)
        self.closest = self.closest_any = None
        self._closest_key = self._closest_any_key = None
        self._rows: dict = {}
        self._floors: dict = {}  # (point, micro-batch index) -> row floors, once refined
        self._pairs: dict = {}  # (point, micro-batch index) -> its PairBounds, once refined
        self._module_pairs: dict = {}  # ... and those of the module ladder (rule 7)
        self._b3: dict = {}  # (point, micro-batch index) -> Theorem B3 floor per row

    def kth_s(self) -> float:
        """The k-th best step time found so far (inf until k plans fit)."""
        return -self.best[0] if len(self.best) >= self.keep else inf

    # ---- the space of one (degree point, micro-batch) -----------------------------------
    def rows(self, pp: int, m: int):
        """(schedules in all, runnable, screened) for a pipeline of pp ranks, m micro-batches:
        the schedule rows search.py's rule 5 leaves to search."""
        key = (pp, m)
        out = self._rows.get(key)
        if out is None:
            pins = self.pins
            scheds = schedule_choices(self.model, pp, m, pins, self.workload.framework)
            runnable = [vs for vs in scheds if rounds_fit(vs[1], pp, m)]
            pinned_s = "schedule" in pins or "schedules" in pins
            screened = [vs for vs in runnable if pp == 1 or pinned_s
                        or not self.schedule_dominated(vs, runnable, pp, m)]
            out = self._rows[key] = (len(scheds), len(runnable), screened)
        return out

    def run(self, points: list, progress=None) -> None:
        # the walk allocates millions of small objects and frees them by reference count;
        # the cyclic collector would rescan the growing caches (a tenth of the time)
        with no_gc():
            self._run(points, progress)

    def _run(self, points: list, progress=None) -> None:
        w = self.workload
        deg_of, layout_of, mbs_of = [], [], []
        queue = []
        left = []  # pairs not yet resolved, per degree point
        for i, d in enumerate(points):
            base = self.base_fields(d.tp)
            deg = dict(base, **dict(d.knobs), dp=d.dp, tp=d.tp, pp=d.pp, cp=d.cp, ep=d.ep,
                       etp=d.etp)
            deg_of.append(deg)
            try:
                layout = layout_plan(deg)
            except InputError:
                layout = None
            layout_of.append(layout)
            mbs = micro_batch_choices(w, d.dp, self.pins)
            mbs_of.append(mbs)
            left.append(len(mbs))
            for j, mb in enumerate(mbs):
                m = w.global_batch // (d.dp * mb)
                queue.append((self._point_floor(layout, mb, m, d.pp), i, j, 0))
        heapq.heapify(queue)
        self.too_big = [inf] * len(points)  # least micro-batch known not to fit
        done = 0

        def resolved(i: int) -> None:
            nonlocal done
            left[i] -= 1
            if not left[i]:
                done += 1
                if progress is not None:
                    progress(done, len(points))

        while queue and queue[0][0] <= self.kth_s():
            floor, i, j, stage = heapq.heappop(queue)
            d, mb = points[i], mbs_of[i][j]
            m = w.global_batch // (d.dp * mb)
            if stage < 3:  # tighten the floor (Theorem B3, plus the least data-parallel
                # exposure, then B1 per row) and queue again
                if stage == 0:
                    tighter = self._pipe_floor(i, j, layout_of[i], mb, m, d.pp)
                elif stage == 1:
                    tighter = self._dp_added(i, j)
                else:
                    floors = self._floors[(i, j)] = self._row_floors(i, j, layout_of[i], mb,
                                                                     m, d.pp)
                    tighter = min(floors.values(), default=inf)
                heapq.heappush(queue, (max(floor, tighter), i, j, stage + 1))
                continue
            self._search_pair(i, j, d, mb, m, deg_of[i], layout_of[i])
            resolved(i)
        for floor, i, j, _ in queue:  # bounded: every floor left is slower than the k-th best
            d, mb = points[i], mbs_of[i][j]
            # (an infinite floor: no plan of the pair can fit, Theorem M)
            self._count(i, d, mb, w.global_batch // (d.dp * mb),
                        NOT_FIT if floor == inf else BOUNDED)
            resolved(i)

    # ---- floors ---------------------------------------------------------------------------
    def _point_floor(self, layout, mb: int, m: int, pp: int) -> float:
        if layout is None:
            return -inf
        try:
            return self.bounds.point_s(self.bounds.costs(layout, mb, self.rcs[0]), m, pp)
        except (InputError, ArithmeticError):  # the estimate will say what is wrong
            return -inf

    def _pipe_floor(self, i: int, j: int, layout, mb: int, m: int, pp: int) -> float:
        """The pair's floor by Theorem B3, each row at its own expert all-to-all overlap
        (kept per row, with the pair's bounds, for the next stages)."""
        rows = self.rows(pp, m)[2]
        b3 = {vs: -inf for vs in rows}
        pb = _NO_BOUNDS
        if layout is not None and rows:
            try:
                pb = self.bounds.pair(layout, mb, m, self.rcs)
                b3 = {}
                for ov in (False, True):  # each row at its own expert all-to-all overlap
                    part = [vs for vs in rows if pb.overlaps(vs[1]) == ov]
                    if part:
                        b3.update(self.bounds.pipe_s(pb.costs(self.rcs[0], ov)[0], m, pp,
                                                     part))
            except (InputError, ArithmeticError):  # the estimate will say what is wrong
                b3, pb = {vs: -inf for vs in rows}, _NO_BOUNDS
        self._b3[(i, j)] = b3
        self._pairs[(i, j)] = pb
        return min(b3.values(), default=inf)

    def _dp_added(self, i: int, j: int) -> float:
        """The pair's Theorem B3 floors plus each row's least data-parallel exposure (over
        the ZeRO stages whose model states may fit: inf when none does); a row already
        slower than the k-th best stays as it is (it only gets more so)."""
        b3, pb = self._b3[(i, j)], self._pairs[(i, j)]
        if pb is not _NO_BOUNDS:
            kth = self.kth_s()
            try:
                b3 = {vs: f + pb.dp_floor_any(*vs) if f <= kth else f for vs, f in b3.items()}
            except (InputError, ArithmeticError):  # the estimate will say what is wrong
                b3 = {vs: -inf for vs in b3}
                self._pairs[(i, j)] = _NO_BOUNDS
            self._b3[(i, j)] = b3
        return min(b3.values(), default=inf)

    def _row_floors(self, i: int, j: int, layout, mb: int, m: int, pp: int) -> dict:
        """Row -> a floor on its plans that may fit ({} when no row is left). Rows are
        tightened (Theorems B1 and M) in the order of their previous floors, as long as
        that can lower the pair's floor."""
        screened = self.rows(pp, m)[2]
        b3 = self._b3.pop((i, j))
        floors = dict(b3)
        pb = self._pairs[(i, j)]
        if pb is not _NO_BOUNDS:
            try:
                kth, best = self.kth_s(), inf
                for vs in sorted(screened, key=b3.get):
                    if b3[vs] >= best or b3[vs] > kth:
                        continue
                    floors[vs] = max(b3[vs], pb.row_floor(*vs, kth))
                    if self.partial and floors[vs] > b3[vs]:  # rule 6's plans (Theorem B4;
                        # its cheap form, at one layer recomputed, where the row is not
                        # bounded anyway)
                        floors[vs] = min(floors[vs], max(b3[vs], self._partial_floor(
                            pb, vs, b3[vs], kth if floors[vs] > kth else -inf)))
                    if self.modules and floors[vs] > b3[vs]:  # rule 7's ladder (Theorem B1
                        # on its own rungs)
                        mpb = self._module_pair(i, j, layout, mb, m)
                        floors[vs] = min(floors[vs], max(b3[vs], mpb.row_floor(*vs, kth)))
                    best = min(best, floors[vs])
            except (InputError, ArithmeticError):  # the estimate will say what is wrong
                self._pairs[(i, j)] = self._module_pairs[(i, j)] = _NO_BOUNDS
                floors = {vs: -inf for vs in screened}
        return floors

    def _module_pair(self, i: int, j: int, layout, mb: int, m: int):
        """The pair's floors on rule 7's module ladder (its own PairBounds: Theorem B1 along a
        chain of rungs whose time only grows)."""
        out = self._module_pairs.get((i, j))
        if out is None:
            out = self._module_pairs[(i, j)] = self.bounds.pair(layout, mb, m, self.modules)
        return out

    def _partial_floor(self, pb, vs: tuple, enough: float = -inf, kth: float = inf) -> float:
        """A floor on the row's partial-recomputation plans (rule 6): Theorem B4's least over
        the ZeRO stages (or the first one at most ``enough``); inf when no partial plan can
        fit at any (Theorem M); a weaker floor that still exceeds ``kth`` where that
        decides."""
        out = inf
        for b in range(len(self.zeros)):
            out = min(out, pb.partial_floor(*vs, b, kth))
            if out <= enough:
                break
        return out

    # ---- counting ---------------------------------------------------------------------------
    def _count(self, i: int, d, mb: int, m: int, reason: str) -> int:
        """Count the pair's plans; those of its screened rows under ``reason`` (or as not
        fitting when a smaller micro-batch of the point did not fit). Returns how many
        screened plans there are (0 when they went to the not-fitting count)."""
        n_all, n_run, screened = self.rows(d.pp, m)
        ladder = self.ladder
        self.considered += n_all * ladder
        if n_all > n_run:
            self.rejected[ROUNDS] += (n_all - n_run) * ladder
        if mb > self.too_big[i]:  # rule 3: a smaller micro-batch did not fit at its leanest
            if n_run:
                self.rejected[NOT_FIT] += n_run * ladder
            return 0
        if n_run > len(screened):
            self.rejected[DOMINATED_SCHEDULE] += (n_run - len(screened)) * ladder
        if screened and reason:
            self.rejected[reason] += len(screened) * ladder
        return len(screened) * ladder

    def _found(self, est, key: tuple, ranked: bool) -> None:
        self.fits.append((est.step_time_s, est.peak_memory_bytes, key, est.plan))
        if ranked:
            self.fitting += 1
            heapq.heappush(self.best, -est.step_time_s)
            if len(self.best) > self.keep:
                heapq.heappop(self.best)

    # ---- one (degree point, micro-batch) pair ----------------------------------------------
    def _search_pair(self, i: int, j: int, d, mb: int, m: int, deg: dict, layout) -> None:
        zeros, rcs, ladder, rejected = self.zeros, self.rcs, self.ladder, self.rejected
        screened = self.rows(d.pp, m)[2]
        floors, pb = self._floors.pop((i, j)), self._pairs.pop((i, j))
        mpb = self._module_pairs.pop((i, j), None)
        if pb is _NO_BOUNDS:
            mpb = _NO_BOUNDS
        elif self.modules and mpb is None:
            mpb = self.bounds.pair(layout, mb, m, self.modules)
        if mb > self.too_big[i] or not screened:
            self._count(i, d, mb, m, "")
            return
        if min(floors.values()) > self.kth_s():  # the k-th best got faster meanwhile
            self._count(i, d, mb, m, BOUNDED)
            return
        n = self._count(i, d, mb, m, "")
        # rule 2: the leanest setting; if it does not fit, nothing at this pair does
        v0, s0 = min(screened, key=lambda vs: self.in_flight_rank0(d.pp, vs))
        lean = self._lean(i, j, deg, mb, v0, s0, pb)
        if lean is False:  # neither lean setting fits
            rejected[NOT_FIT] += n
            self.too_big[i] = min(self.too_big[i], mb)  # rule 3
            return
        if isinstance(lean, InputError):
            rejected[f"invalid: {lean.field} ({lean.allowed})"] += n
            return
        lean_found = lean is not None and (
            self.engine is None or not plan_violations(self.engine, lean.plan, self.model,
                                                      self.workload))
        if lean_found:
            self._found(lean, (i, j, -1, 0, 0), ranked=False)
        order = sorted(range(len(screened)), key=lambda r: floors[screened[r]])
        for r in order:
            vpp, sched = screened[r]
            row_floor = floors[(vpp, sched)]
            if row_floor > self.kth_s():  # Theorem B1 (and M), the whole row
                lean_here = lean_found and (vpp, sched) == (v0, s0)
                rejected[NOT_FIT if row_floor == inf else BOUNDED] += ladder - int(lean_here)
                self.fitting += int(lean_here)
                continue
            self._walk_row(i, j, r, deg, mb, vpp, sched, pb, mpb)

    def _lean(self, i: int, j: int, deg: dict, mb: int, v0: int, s0: str, pb):
        """Rule 2's lean setting of the pair (full recomputation, the ZeRO stage holding
        least, the schedule with the fewest micro-batches in flight): its estimate when it
        fits, False when it does not (then no setting of the pair fits), None when it was
        not estimated because it cannot be among the k best (Theorem B1: the plain walk
        would add it to the plans found, slower than the k-th best), or the InputError."""
        zeros, lean_rc = self.zeros, self.rcs[-1]
        cands = [zeros[-1]] + ([2] if zeros[-1] == 3 and 2 in zeros else [])
        kth = self.kth_s()
        time_f = pb.time_floors(v0, s0, lean_rc)
        fit_f = [pb.may_fit(v0, s0, lean_rc, b) for b in range(len(zeros))]

        def plan(z):
            return Plan(**dict(deg, micro_batch=mb, vpp=v0, schedule=s0, recompute=lean_rc,
                               zero=z))

        if kth == inf:  # nothing is bounded yet: estimate as the plain walk does
            try:
                lean = estimate(self.model, self.cluster, self.workload, plan(cands[0]))
            except InputError as e:
                return e
            self.evaluated += 1
            if not lean.fits and len(cands) > 1:
                lean2 = estimate(self.model, self.cluster, self.workload, plan(2))
                self.evaluated += 1
                if lean2.fits or lean2.peak_memory_bytes < lean.peak_memory_bytes:
                    lean = lean2
            if lean.fits:
                return lean
            key = (lean.peak_memory_bytes, i, j)
            if self.closest_any is None or key < self._closest_any_key:
                self.closest_any, self._closest_any_key = lean, key
            if (self.closest is None or key < self._closest_key) and (
                    self.engine is None or not plan_violations(self.engine, lean.plan,
                                                               self.model, self.workload)):
                self.closest, self._closest_key = lean, key
            return False
        # the first setting of `cands` that fits is the lean one; estimate only what can
        # decide a lean setting faster than the k-th best
        for c, z in enumerate(cands):
            b = zeros.index(z)
            if not fit_f[b]:  # Theorem M: cannot fit
                continue
            later = [zeros.index(y) for y in cands[c + 1:]]
            if time_f[b] > kth and not any(fit_f[x] and time_f[x] <= kth for x in later):
                return None  # whichever setting is the lean one, it is too slow
            try:
                est = estimate(self.model, self.cluster, self.workload, plan(z))
            except InputError as e:
                return e
            self.evaluated += 1
            if est.fits:
                return est
        return False

    def _walk_row(self, i: int, j: int, r: int, deg: dict, mb: int, vpp: int, sched: str,
                  pb, mpb=None) -> None:
        """Rule 1's walk of one row along the main ladder, then rule 7's module ladder
        (``mpb``: its floors) and rule 6's partial recomputation where no recomputation does
        not fit at the first ZeRO stage."""
        zeros, rcs = self.zeros, self.rcs
        fitted, time_f, est_s, misses = self._walk_ladder(i, j, r, deg, mb, vpp, sched, pb,
                                                          rcs, 0)
        a_none = rcs.index("none") if "none" in rcs else None
        none_fits_at = fitted.get(a_none)  # rule 6: the first ZeRO stage where none fits
        # ZeRO stage -> step time (or its floor) with no recomputation, where it was reached
        none_floor_s = dict(zip(zeros, time_f.get(a_none, ())))
        none_floor_s.update({z: t for (a, z), t in est_s.items() if a == a_none})
        # ZeRO stages where every layer recomputed does not fit
        full_misses = {z for a, z in misses if rcs[a] == "full"}
        if self.modules:
            if none_fits_at == zeros[0]:  # rule 1: no recomputation fits at the first stage
                self.rejected[DOMINATED] += len(zeros) * len(self.modules)
            else:
                self._walk_ladder(i, j, r, deg, mb, vpp, sched, mpb, self.modules,
                                  len(rcs) + 1)
        if self.partial and none_fits_at != zeros[0]:
            self._partial_row(i, j, r, deg, mb, vpp, sched, none_fits_at, none_floor_s,
                              full_misses, pb)

    def _walk_ladder(self, i: int, j: int, r: int, deg: dict, mb: int, vpp: int, sched: str,
                     pb, rungs: list, key0: int):
        """Rule 1's walk of one row along a ladder of recomputation rungs whose time only
        grows (RECOMPUTE_ORDER, or rule 7's module ladder; ``pb`` its floors): per rung the
        first ZeRO stage that fits, skipping rungs slower than the k-th best (Theorem B1) and
        rungs that cannot fit (Theorem M), ended by a rung that fits with no lower stage
        missed. Plans found are keyed (i, j, r, key0 + rung, stage). Returns what rules 6 and
        7 read: {rung: ZeRO stage it fits at}, {rung reached: its time floors}, {(rung,
        stage): estimated step time}, {(rung, stage) that does not fit}."""
        zeros, rejected = self.zeros, self.rejected
        tried = bounded = 0
        fitted: dict = {}
        time_fs: dict = {}
        est_s: dict = {}
        misses: set = set()
        for a, rung in enumerate(rungs):
            if min(pb.floor_from(vpp, sched, a, b) for b in range(len(zeros))) > self.kth_s():
                bounded += (len(rungs) - a) * len(zeros)  # Theorem B1: this and every later rung
                break
            time_f = time_fs[a] = pb.time_floors(vpp, sched, rung)
            missed = False  # a lower ZeRO stage did not fit (or was skipped) at this rung
            for b, z in enumerate(zeros):
                if time_f[b] > self.kth_s():  # Theorem B1
                    bounded += 1
                    missed = True
                    continue
                tried += 1
                try:
                    plan = Plan(**dict(deg, micro_batch=mb, vpp=vpp, schedule=sched, zero=z,
                                       **rung_fields(rung)))
                    if not self.runs_on_engine(plan):
                        continue
                    if not pb.may_fit(vpp, sched, rung, b):  # Theorem M
                        rejected[NOT_FIT] += 1
                        missed = True
                        misses.add((a, z))
                        continue
                    est = estimate(self.model, self.cluster, self.workload, plan)
                except InputError as e:
                    rejected[f"invalid: {e.field} ({e.allowed})"] += 1
                    continue
                self.evaluated += 1
                est_s[(a, z)] = est.step_time_s
                if not est.fits:
                    rejected[NOT_FIT] += 1
                    missed = True
                    misses.add((a, z))
                    continue
                self._found(est, (i, j, r, key0 + a, b), ranked=True)
                fitted[a] = z
                break
            if a in fitted and not missed:
                break  # rule 1: more recomputation cannot be faster
        if bounded:
            rejected[BOUNDED] += bounded
        if len(zeros) * len(rungs) - tried - bounded:
            rejected[DOMINATED] += len(zeros) * len(rungs) - tried - bounded
        return fitted, time_fs, est_s, misses

    def _partial_row(self, i: int, j: int, r: int, deg: dict, mb: int, vpp: int, sched: str,
                     none_fits_at, none_floor_s: dict, full_misses: set, pb) -> None:
        """search.py's rule 6 on one row: the fewest layers recomputed that fit, at the ZeRO
        stages below the first where no recomputation fits, where no recomputation (faster
        than any partial plan at its stage; its estimate, or its floor when it was not
        estimated) is not slower than the k-th best, and where every layer recomputed was
        not found not to fit (a partial plan holds more)."""
        zeros = self.zeros
        zs = zeros if none_fits_at is None else zeros[:zeros.index(none_fits_at)]
        zs = [z for z in zs if z not in full_misses
              and none_floor_s.get(z, inf) <= self.kth_s()
              and pb.partial_floor(vpp, sched, zeros.index(z), self.kth_s())
              <= self.kth_s()]  # Theorem B4
        if not zs:
            return
        base = Plan(**dict(deg, micro_batch=mb, vpp=vpp, schedule=sched, recompute="full"))

        def expressible(plan: Plan) -> bool:  # the engine's limits, not counted as a refusal
            return self.engine is None or not plan_violations(self.engine, plan, self.model,
                                                              self.workload)
        rejected = self.rejected
        for k, (est, chosen) in enumerate(partial_fits(self.model, self.cluster, self.workload,
                                                       base, zs, expressible)):
            self.considered += 1
            self.partial_considered += 1
            if isinstance(est, InputError):
                rejected[f"invalid: {est.field} ({est.allowed})"] += 1
                continue
            self.evaluated += 1
            if not est.fits:
                rejected[NOT_FIT] += 1
                continue
            if not chosen:
                rejected[DOMINATED_PARTIAL] += 1
                continue
            self._found(est, (i, j, r, len(self.rcs), k), ranked=True)


class _NoBounds:
    """Floors of a pair the bounds cannot compute (the estimate will reject its plans)."""

    def time_floors(self, vpp, schedule, rc):
        return [-inf] * 8

    def may_fit(self, vpp, schedule, rc, b):
        return True

    def row_floor(self, vpp, schedule, kth):
        return -inf

    def floor_from(self, vpp, schedule, a, b):
        return -inf

    def dp_floor_any(self, vpp, schedule):
        return 0.0

    def partial_floor(self, vpp, schedule, b, kth=inf):
        return -inf


_NO_BOUNDS = _NoBounds()
