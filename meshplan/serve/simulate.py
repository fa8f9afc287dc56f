"""Discrete-event simulation of continuous batching, as vLLM (V1) and SGLang schedule it.

Each engine (a replica; one per pipeline micro-batch slot and per attention-DP rank) loops:
requests arrive and wait; at the start of an iteration the scheduler gives every running
request its next tokens first (one decode token, or the next prefill chunk), then admits
waiting requests first-come first-served while fewer than ``max_num_seqs`` run, the
iteration's token budget (``max_batched_tokens``, the chunked-prefill budget) lasts and
free KV blocks hold their chunk. A running request that needs a new block when none is
free preempts the most recently admitted request, whose blocks are freed and whose tokens
are recomputed later (vLLM's recompute preemption). The iteration takes the cost model's
time for exactly that batch; a prefill that completes samples the first token; each
decode adds one; a finished request frees its blocks.

SGLang admits a waiting request only while the free blocks, less its estimate of the output
the running requests still owe, hold the new prompt and its whole output (SGLANG_* below).
SGLang without --enable-mixed-chunk (its default; ServePlan.mixed_chunk False) does not mix:
an iteration is a prefill batch alone (the prompt being chunked first, then waiting requests
while the token budget, the running-request cap and free blocks last) whenever one can be
formed, and a decode step of every running request only when none can.

Attention data parallelism: the DP ranks of a replica (one engine each) schedule their own
requests but run each iteration together (``_Team``), its time set by StepModel.
lockstep_step_s from all ranks' batches.

Decoding requests are stepped as one group per engine where that gives the same iterations
(``_absorb``); ``decode_group=False`` steps them one by one.

Disaggregated plans: prefill engines run prompts only; a finished prefill's KV cache
moves to the least-loaded decode engine (time from serve/cost.py), which then decodes it.
TTFT counts until the cache has arrived there (the first token streams from the decode
side, as in SGLang's PD mode).

The whole deployment runs on one event heap, so closed-loop clients (a fixed concurrency)
send their next request when the previous one finishes, wherever it finished.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from ..errors import InputError
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from .cost import StepModel, kv_transfer_s, window_pairs
from .memory import kv_layer_split, serve_memory, window_blocks_held
from .spec import Pool, ServePlan
from .traffic import Traffic

# SGLang admits a waiting request only if the free KV tokens, less an estimate of what the
# running requests will still write, hold its prompt and its whole output (PrefillAdder in
# python/sglang/srt/managers/schedule_policy.py: rem_total_tokens, add_one_req): each running
# request is charged min(max_new_tokens - generated, CLIP) x new_token_ratio, a new one its
# prompt + min(max_new_tokens, CLIP). The ratio starts at INIT, falls by (INIT - INIT x
# MIN_FACTOR) / DECAY_STEPS after every decode batch that found room, is set to
# min(1, (generated + RETRACT_STEPS x running) / max_new_tokens summed over the running
# requests) after a retraction, and back to INIT when the engine goes idle (Scheduler
# init_new_token_ratio, update_running_batch; ScheduleBatch.retract_decode). Values: the
# defaults of python/sglang/srt/environ.py (SGLANG_INIT_NEW_TOKEN_RATIO,
# SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS,
# SGLANG_RETRACT_DECODE_STEPS, SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION) at
# --schedule-conservativeness 1.
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS = 600
SGLANG_RETRACT_DECODE_STEPS = 20
SGLANG_CLIP_MAX_NEW_TOKENS = 4096


class _Req:
    __slots__ = ("id", "arrival", "inp", "out", "cached", "todo", "kv", "gen", "blocks",
                 "first", "finish", "client", "admitted", "member", "above", "freeing")

    def __init__(self, rid: int, arrival: float, inp: int, out: int, cached: int, client: int):
        self.id, self.arrival, self.inp, self.out = rid, arrival, inp, out
        self.cached = cached  # prompt tokens served from the prefix cache
        self.todo = inp - cached  # prompt tokens still to compute
        self.kv = cached  # tokens in this engine's cache
        self.gen = 0  # output tokens produced
        self.blocks = 0
        self.first = math.nan
        self.finish = math.nan
        self.client = client
        self.admitted = 0
        self.member = 0  # the decode group's number for it while it is a member, else 0
        self.above = False  # member: its kv has reached the sliding window
        self.freeing = False  # member: past the window by a block (frees one every B tokens)


class _Engine:
    def __init__(self, idx: int, pool: Pool, step: StepModel, kv_tokens: int, block: int,
                 role: str, max_seqs: int, reserve: bool = False, decode_group: bool = True,
                 prefill_first: bool = False, sglang: bool = False):
        self.idx, self.pool, self.step, self.role = idx, pool, step, role
        self.block = block
        self.capacity_blocks = kv_tokens // block
        self.capacity_tokens = self.capacity_blocks * block
        # Sliding-window models: the cache is a byte budget shared by both layer kinds
        # (vLLM's hybrid allocator, serve/memory.py), counted here in layer-blocks (one
        # block of one layer of this stage); full layers hold every block, windowed layers
        # only the window (memory.window_blocks_held). Models without windows count blocks.
        model = step.model
        self.window = model.sliding_window if model.sliding_layers else 0
        self.full_layers, self.window_layers = kv_layer_split(model, pool.pp)
        if self.window:
            self.capacity_blocks *= self.full_layers + self.window_layers
        self.free = self.capacity_blocks
        self.max_seqs = max_seqs
        self.max_tokens = pool.max_batched_tokens
        # reserve: blocks for the whole request (prompt + output) at admission, never evict
        # (TensorRT-LLM's default GUARANTEED_NO_EVICT capacity scheduler); otherwise blocks
        # as tokens are computed and recompute preemption (vLLM, SGLang retraction)
        self.reserve = reserve
        # TensorRT-LLM schedules a prompt whole (enable_chunked_context is off by default)
        # unless it is longer than the token budget, which needs chunking on; vLLM and
        # SGLang chunk freely
        self.whole_prompts = reserve
        # SGLang's default: prefill batches alone and first, decode steps without admissions
        self.prefill_first = prefill_first and role == "both"
        self.admitting = True  # False while a prefill-first engine forms a decode step
        # SGLang's admission estimate (SGLANG_* above), for engines that run both phases
        self.sglang = sglang and role == "both"
        self.new_token_ratio = SGLANG_INIT_NEW_TOKEN_RATIO
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []
        self.busy = False
        self.batch: list[tuple[_Req, int]] = []
        self.preemptions = 0
        self.iterations = 0
        self.busy_s = 0.0
        self.seq_sum = 0  # requests per iteration, summed
        self.kv_samples: list[tuple[float, float]] = []
        self.area = 0.0  # time-integral of requests in this engine (waiting + running)
        self.last_t = 0.0
        self.admit_seq = 0
        self.team: _Team | None = None  # attention DP: the ranks this engine steps with
        self.free_seen = 0  # ``free`` when simulate() last summed the deployment's blocks
        # the decode group (see _absorb): its size, the iterations it has run, its members'
        # stored kv summed and counted by kv mod block, and who finishes at which step
        # (TensorRT-LLM-style reservation with a window: every request stepped alone)
        self.use_group = decode_group and not (self.window and reserve)
        self.batch_group = 0  # group members in the iteration in flight
        self.steps = 0
        self.member_seq = 0
        self._clear_group()

    def load(self) -> int:
        return len(self.waiting) + len(self.running)

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block)

    def _demand(self, computed: int, total: int) -> int:
        """Units (blocks; layer-blocks with a window) a request holds once it has slots up
        to ``total`` tokens, having computed ``computed`` of them."""
        if not self.window:
            return -(-total // self.block)
        return (self.full_layers * -(-total // self.block)
                + self.window_layers * window_blocks_held(computed, total, self.window,
                                                          self.block))

    def _reserve_demand(self, r: "_Req") -> int:
        """TensorRT-LLM-style reservation for the whole request: the most it will hold.
        Windowed layers: TensorRT-LLM reserves ceil(min(prompt + max_new, window +
        temporaryAttentionWindow) / B) blocks per window size
        (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp getRemainingBlocksToCompletion,
        NVIDIA/TensorRT-LLM commit b35ac1b64368513d215c57d2ed01d62d910df8da), the temporary
        window covering the context computed in one pass; here the window plus the largest
        chunk (the whole prompt unless longer than the budget), plus one block for the
        window's unaligned start, as vLLM's rule gives at the prompt step."""
        total = r.inp + r.out
        if not self.window:
            return self._blocks_for(total)
        chunk = min(r.inp, self.max_tokens)
        win = min(self._blocks_for(total), self._blocks_for(self.window - 1 + chunk) + 1)
        return self.full_layers * self._blocks_for(total) + self.window_layers * win

    def _preempt_last(self) -> _Req:
        """Preempt the most recently admitted running request (the end of the list)."""
        v = self.running.pop()
        self.free += v.blocks
        v.blocks = 0
        # recompute: its prompt and the tokens it produced are computed again, then it
        # samples its next token (its share of the shared prefix stays cached)
        v.todo = (v.inp + v.gen if v.gen > 0 else v.inp) - v.cached
        v.kv = v.cached
        self.waiting.appendleft(v)
        self.preemptions += 1
        return v

    def schedule(self) -> list[tuple[_Req, int]]:
        """The next iteration's batch: (request, tokens) pairs after the group's ``self.
        batch_group`` requests, which decode one token each (see _group_schedule)."""
        self.batch_group = 0
        if self.prefill_first:
            batch = self._prefill_batch()
            if batch:
                return batch
            self.admitting = False
        preempted = self.preemptions
        try:
            batch = self._decode_schedule()
        finally:
            self.admitting = True
        if self.sglang:
            self._update_ratio(batch, self.preemptions > preempted)
        return batch

    def _decode_schedule(self) -> list[tuple[_Req, int]]:
        if self.use_group:
            self._absorb()
            if self.group:
                batch = self._group_schedule()
                if batch is not None:
                    return batch
                self._dissolve()
        return self._plain_schedule()

    def _true_gen(self, r: "_Req") -> int:
        """Tokens ``r`` has produced (a decode group member stores it as of step 0)."""
        return r.gen + self.steps if r.member else r.gen

    def _update_ratio(self, batch: list, retracted: bool) -> None:
        """SGLang's new_token_ratio after forming an iteration (SGLANG_* above)."""
        init = SGLANG_INIT_NEW_TOKEN_RATIO
        if not batch and not self.batch_group:
            self.new_token_ratio = init  # idle
        elif retracted:
            gen = sum(self._true_gen(r) for r in self.running)
            out = sum(r.out for r in self.running)
            self.new_token_ratio = min(1.0, (gen + SGLANG_RETRACT_DECODE_STEPS
                                             * len(self.running)) / out) if out else init
        elif self.batch_group or any(r.todo <= 0 for r, _ in batch):  # a decode batch ran
            low = init * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
            self.new_token_ratio = max(self.new_token_ratio - (init - low)
                                       / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS, low)

    def _free_tokens(self) -> float:
        """Free KV cache in tokens (free layer-blocks over the layers, with a window)."""
        units = (self.full_layers + self.window_layers) if self.window else 1
        return self.free * self.block / units

    def _owed_tokens(self, batch: list) -> float:
        """PrefillAdder.rem_total_token_offset before admitting: the running requests'
        estimated remaining output (and, mixing, this batch's decode tokens)."""
        clip = SGLANG_CLIP_MAX_NEW_TOKENS
        owed = sum(min(r.out - self._true_gen(r), clip) for r in self.running)
        owed *= self.new_token_ratio
        if not self.prefill_first:
            owed += self.batch_group + sum(1 for r, _ in batch if r.todo <= 0)
        return owed

    def _prefill_batch(self) -> list[tuple[_Req, int]]:
        """SGLang's prefill batch (Scheduler.get_new_batch_prefill): the request whose prompt
        is being chunked takes its next chunk first, then waiting requests are admitted; no
        decode token rides along. Empty when nothing can be prefilled: the engine decodes."""
        budget = self.max_tokens
        batch: list[tuple[_Req, int]] = []
        for r in self.running:
            if r.todo <= 0 or r.member:
                continue
            n = min(r.todo, budget)
            need = max(0, self._demand(r.kv, r.kv + n) - r.blocks)
            if n <= 0 or need > self.free:
                return []  # no room for the chunk: decode (and free blocks) first
            self.free -= need
            r.blocks += need
            batch.append((r, n))
            budget -= n
        self._admit_waiting(budget, batch)
        return batch

    def _plain_schedule(self) -> list[tuple[_Req, int]]:
        budget = self.max_tokens
        batch: list[tuple[_Req, int]] = []
        running = self.running
        block, w = self.block, self.window
        full, win = self.full_layers, self.window_layers
        clamp = not w or self.reserve  # (windowed: a negative need frees the blocks that
        i = 0                          # slid out of the window, as vLLM does before allocating)
        preempted = self.preemptions
        while i < len(running) and budget > 0:
            r = running[i]
            todo, kv = r.todo, r.kv
            n = (todo if todo < budget else budget) if todo > 0 else 1
            # self._demand(kv, kv + n) - r.blocks, written out (the simulator's inner loop)
            held = -(-(kv + n) // block)
            if w:
                skipped = (kv - w + 1) // block if kv - w + 1 > 0 else 0
                held = full * held + win * (held - (skipped if skipped < held else held))
            need = held - r.blocks
            if clamp and need < 0:
                need = 0
            if need > self.free:
                preempted_self = False
                while need > self.free:
                    if self._preempt_last() is r:
                        preempted_self = True
                        break
                if preempted_self:
                    if not batch and not running:  # alone, with the whole cache, it does
                        # not fit: recomputing it would fill the cache the same way again
                        raise InputError("kv cache", self.capacity_tokens,
                                         f"a request of {r.inp} prompt + {r.out} output "
                                         "tokens does not fit the replica's KV cache")
                    break  # r was the last running request; nothing after it
            self.free -= need
            r.blocks += need
            batch.append((r, n))
            budget -= n
            i += 1
        if self.preemptions > preempted and batch:  # vLLM V1: no admissions in a step that
            return batch                             # preempted (unless nothing else runs)
        self._admit_waiting(budget, batch)
        return batch

    def _admit_waiting(self, budget: int, batch: list[tuple[_Req, int]]) -> None:
        if not self.admitting:
            return
        if self.role != "decode":
            room = None  # SGLang's estimate, summed only when the free tokens alone admit
            while self.waiting and len(self.running) < self.max_seqs and budget > 0:
                r = self.waiting[0]
                if self.whole_prompts and budget < r.todo <= self.max_tokens:
                    break  # wait for an iteration with room for the whole prompt
                n = min(r.todo, budget) if r.todo > 0 else 1
                if self.sglang:  # add_one_req: prompt + whole output must fit the estimate
                    est = min(r.out, SGLANG_CLIP_MAX_NEW_TOKENS)
                    if room is None:
                        free = self._free_tokens()
                        if r.todo + est >= free:
                            break
                        room = free - self._owed_tokens(batch)
                    if r.todo + est >= room:
                        break
                    room -= n + (est if n == r.todo else 0)
                need = self._demand(r.kv, r.kv + n) - r.blocks
                if self.reserve:
                    need = max(need, self._reserve_demand(r) - r.blocks)
                if need > self.free:
                    if not self.running and not batch:
                        raise InputError("kv cache", self.capacity_tokens,
                                         f"a request of {r.inp} prompt tokens does not fit the"
                                         " replica's KV cache")
                    break
                self._admit(r, n, need, batch)
                budget -= n
        else:  # decode engines admit arrived caches whole (their first step decodes)
            while self.waiting and len(self.running) < self.max_seqs and budget > 0:
                r = self.waiting[0]
                n = min(r.todo, budget) if r.todo > 0 else 1
                need = (self._reserve_demand(r) if self.reserve
                        else self._demand(r.kv, r.kv + n)) - r.blocks
                if need > self.free:
                    if not self.running and not batch:
                        raise InputError("kv cache", self.capacity_tokens,
                                         f"a request of {r.kv} cached tokens does not fit the"
                                         " decode replica's KV cache")
                    break
                self._admit(r, n, need, batch)
                budget -= n

    def _admit(self, r: _Req, n: int, need: int, batch: list) -> None:
        """Move the first waiting request into the running set with ``need`` more blocks and
        ``n`` tokens in this iteration's batch."""
        self.waiting.popleft()
        self.free -= need
        r.blocks += need
        self.admit_seq += 1
        r.admitted = self.admit_seq
        self.running.append(r)
        batch.append((r, n))

    # ---- the decode group: the same iterations as the per-request loop, in O(1) a step --
    # The first ``group`` running requests are decoding and hold exactly the blocks their
    # tokens need. Every iteration gives each of them one token, so they are kept as a
    # whole: their kv and gen are stored as of step 0 of the engine's ``steps`` counter
    # (the true values add ``steps``), the iteration's context sum is ``kv_sum + steps *
    # group``, a member takes a new block (a block per layer with a window) when its kv
    # crosses a block boundary (``residues``: members by stored kv mod block) and leaves at
    # a step known when it joins (``finishing``). With a sliding window a member's context
    # counts up to the window (``below_*`` / ``above``) and, once its kv is a block past
    # the window, its windowed layers free a block every ``block`` tokens (``freeing``);
    # both start at steps known when it joins (``crossing``, ``activating``). A member's
    # kv, gen and blocks are written back when it finishes or the group is dissolved (a
    # preemption may happen, or more members than the token budget), so every iteration's
    # batch, time, block use and event order is the one the per-request loop gives
    # (tests/test_serve.py and tests/test_serve_window.py compare the two).
    def _clear_group(self) -> None:
        block = self.block
        self.group = 0
        self.kv_sum = 0
        self.residues = [0] * block
        self.finishing: dict[int, list[tuple[int, _Req]]] = {}
        self.below_sum = self.below_count = self.above = 0
        self.freeing = [0] * block  # freeing members by stored kv mod block
        self.crossing: dict[int, list[tuple[int, _Req]]] = {}
        self.activating: dict[int, list[tuple[int, _Req]]] = {}

    def _absorb(self) -> None:
        """Add decoding requests that follow the group in the running list to it."""
        running, block, s, w = self.running, self.block, self.steps, self.window
        while self.group < len(running):
            r = running[self.group]
            kv = r.kv
            if r.todo > 0 or r.gen >= r.out or kv < 1:
                return
            if self.reserve:  # every block it will take is already held (no window)
                if r.blocks < -(-(kv + r.out - r.gen) // block):
                    return
            elif r.blocks != self._demand(kv - 1, kv):  # as after a decode step
                return
            r.kv = f = kv - s
            r.gen -= s
            self.member_seq += 1
            r.member = m = self.member_seq
            self.residues[f % block] += 1
            self.kv_sum += f
            self.finishing.setdefault(r.out - r.gen - 1, []).append((m, r))
            if w:
                r.above = kv >= w
                if r.above:
                    self.above += 1
                else:
                    self.below_sum += f
                    self.below_count += 1
                    self.crossing.setdefault(w - f, []).append((m, r))
                r.freeing = kv >= w - 1 + block
                if r.freeing:
                    self.freeing[f % block] += 1
                else:
                    self.activating.setdefault(w - 1 + block - f, []).append((m, r))
            self.group += 1

    def _leave(self, r: _Req, s: int) -> None:
        """Take member ``r`` out of the group's sums and write back its state at step s."""
        f = r.kv
        self.residues[f % self.block] -= 1
        self.kv_sum -= f
        if self.window:
            if r.above:
                self.above -= 1
            else:
                self.below_sum -= f
                self.below_count -= 1
            if r.freeing:
                self.freeing[f % self.block] -= 1
        r.member = 0
        r.kv += s
        r.gen += s
        if not self.reserve:
            r.blocks = self._demand(r.kv - 1, r.kv)

    def _dissolve(self) -> None:
        s = self.steps
        for r in self.running[:self.group]:
            self._leave(r, s)
        self._clear_group()

    def _window_events(self, s: int) -> None:
        """Members whose kv reaches the window, or a block past it, at step s."""
        for m, r in self.crossing.pop(s, ()):
            if r.member == m:
                r.above = True
                self.above += 1
                self.below_sum -= r.kv
                self.below_count -= 1
        for m, r in self.activating.pop(s, ()):
            if r.member == m:
                r.freeing = True
                self.freeing[r.kv % self.block] += 1

    def _group_schedule(self) -> list[tuple[_Req, int]] | None:
        """The iteration's batch after the group, or None where the per-request loop must
        run (the group exceeds the token budget, or some request may preempt)."""
        g = self.group
        budget = self.max_tokens - g
        if budget < 0:
            return None
        s, block, w = self.steps, self.block, self.window
        free = self.free
        if w:
            self._window_events(s)
            # each member's need is at most its new blocks, so no running prefix of the
            # per-request loop needs more than this: no preemption
            taking = (self.full_layers + self.window_layers) * self.residues[(-s) % block]
            if taking > free:
                return None
            free -= taking - self.window_layers * self.freeing[(w - 1 - s) % block]
        elif not self.reserve:
            free -= self.residues[(-s) % block]
            if free < 0:
                return None
        running = self.running
        clamp = not w or self.reserve
        plan = []
        i = g
        while i < len(running) and budget > 0:
            r = running[i]
            todo = r.todo
            n = (todo if todo < budget else budget) if todo > 0 else 1
            need = self._demand(r.kv, r.kv + n) - r.blocks
            if clamp and need < 0:
                need = 0
            if need > free:
                return None
            free -= need
            plan.append((r, n, need))
            budget -= n
            i += 1
        self.free = free
        batch = []
        for r, n, need in plan:
            r.blocks += need
            batch.append((r, n))
        self.batch_group = g
        self._admit_waiting(budget, batch)
        return batch

    def group_finished(self) -> list[_Req]:
        """End of an iteration the group ran in: the members that produced their last
        token, in running order, written back and removed from the running list."""
        s = self.steps
        self.steps = s + 1
        fin = self.finishing.pop(s, None)
        if not fin:
            return []
        out = []
        for _, r in sorted(fin, key=lambda x: x[0]):
            self._leave(r, s + 1)
            self.running.remove(r)
            self.group -= 1
            out.append(r)
        return out

    def group_context(self) -> tuple[int, int]:
        """(sum of kv, sum of min(kv, window)) over the group at this step."""
        s, g = self.steps, self.group
        ctx = self.kv_sum + s * g
        if not self.window:
            return ctx, ctx
        return ctx, self.below_sum + s * self.below_count + self.window * self.above

    def cost(self, batch: list[tuple[_Req, int]]) -> float:
        """Seconds of the iteration: the group's ``batch_group`` decodes and ``batch``."""
        return self.step.step_s(*self.step_args(batch))

    def step_args(self, batch: list[tuple[_Req, int]]) -> tuple:
        """StepModel.step_s's arguments for the iteration: the group's ``batch_group``
        decodes and ``batch``. (Context sums are integers, exact in a float whatever the
        order.)"""
        g = self.batch_group
        tokens = logits = g
        dec_ctx = pairs = pre_ctx = 0.0
        dec_w = pairs_w = pre_w = 0.0  # the same sums capped at the sliding window
        if g:
            ctx, ctx_w = self.group_context()
            dec_ctx, dec_w = float(ctx), float(ctx_w)
        w = self.window
        for r, n in batch:
            tokens += n
            todo = r.todo
            if todo > 0:  # prefill chunk from position a
                a = r.kv
                pairs += n * a + n * (n + 1) / 2
                pre_ctx += a
                if w:
                    pairs_w += window_pairs(a, n, w)
                    pre_w += a if a < w else w
                if n == todo:
                    logits += 1
            else:
                kv = r.kv
                dec_ctx += kv
                if w:
                    dec_w += kv if kv < w else w
                logits += 1
        if not w:
            return tokens, g + len(batch), dec_ctx, pairs, pre_ctx, logits
        return tokens, g + len(batch), dec_ctx, pairs, pre_ctx, logits, dec_w, pairs_w, pre_w


class _Team:
    """The engines of one attention data-parallel replica (one per DP rank). They step in
    lockstep, as SGLang's and TensorRT-LLM's attention DP and vLLM's data-parallel expert
    parallelism run them: every iteration each rank schedules its own requests, the MoE
    layers' collective (all-to-all; TensorRT-LLM's all-gather and reduce-scatter) joins all
    ranks every layer (an idle rank runs a dummy batch), so
    the iteration ends for all of them at once (StepModel.lockstep_step_s)."""

    def __init__(self, members: list[_Engine]):
        self.members = members
        self.pending = False  # an iteration start is queued
        for e in members:
            e.team = self


@dataclass
class SimResult:
    """Per-request times and deployment totals. Times in seconds from the first arrival."""

    plan: ServePlan
    gpus: int
    arrival_s: list[float]
    first_token_s: list[float]
    finish_s: list[float]
    input_len: list[int]
    output_len: list[int]
    makespan_s: float
    preemptions: int
    iterations: int
    kv_use: list[tuple[float, float]]  # (time, share of KV blocks in use), all engines
    mean_in_system: float  # time-average of requests in the deployment
    busy_share: float
    engines: int
    mean_batch: float  # requests per iteration, mean over all engines' iterations
    slo: dict = field(default_factory=dict)

    # ---- per-request metrics -----------------------------------------------------------
    @property
    def ttft_s(self) -> list[float]:
        return [f - a for f, a in zip(self.first_token_s, self.arrival_s)]

    @property
    def e2e_s(self) -> list[float]:
        return [f - a for f, a in zip(self.finish_s, self.arrival_s)]

    @property
    def tpot_s(self) -> list[float]:
        return [(f - t) / (o - 1) for f, t, o in zip(self.finish_s, self.first_token_s,
                                                     self.output_len) if o > 1]

    def output_tokens_per_s_per_gpu(self) -> float:
        return sum(self.output_len) / self.makespan_s / self.gpus

    def total_tokens_per_s_per_gpu(self) -> float:
        return (sum(self.output_len) + sum(self.input_len)) / self.makespan_s / self.gpus

    def tokens_per_s_per_user(self) -> float:
        t = self.tpot_s
        return 1.0 / (sum(t) / len(t)) if t else math.nan

    def attainment(self, ttft_s: float | None, tpot_s: float | None) -> float:
        """Share of requests within both SLOs (per request, as DistServe counts)."""
        ok = 0
        for f, fin, a, o in zip(self.first_token_s, self.finish_s, self.arrival_s,
                                self.output_len):
            good = ttft_s is None or f - a <= ttft_s
            if tpot_s is not None and o > 1:
                good = good and (fin - f) / (o - 1) <= tpot_s
            ok += good
        return ok / len(self.arrival_s)

    def summary(self) -> dict:
        def pct(xs: list[float]) -> dict:
            return {"p50": percentile(xs, 50), "p90": percentile(xs, 90),
                    "p99": percentile(xs, 99), "mean": sum(xs) / len(xs) if xs else math.nan}

        return {"ttft_s": pct(self.ttft_s), "tpot_s": pct(self.tpot_s), "e2e_s": pct(self.e2e_s),
                "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu(),
                "total_tokens_per_s_per_gpu": self.total_tokens_per_s_per_gpu(),
                "tokens_per_s_per_user": self.tokens_per_s_per_user(),
                "requests_per_s": len(self.arrival_s) / self.makespan_s,
                "preemptions": self.preemptions, "iterations": self.iterations,
                "kv_use_peak": max((u for _, u in self.kv_use), default=0.0),
                "kv_use_mean": (sum(u for _, u in self.kv_use) / len(self.kv_use)
                                if self.kv_use else 0.0),
                "mean_in_system": self.mean_in_system, "makespan_s": self.makespan_s,
                "mean_batch": self.mean_batch}


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    if not xs:
        return math.nan
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _engines_for(pool: Pool, model: ModelSpec, cluster: Cluster, plan: ServePlan,
                 role: str, start: int, decode_group: bool = True) -> list[_Engine]:
    mem = serve_memory(model, cluster.gpu, pool, plan.weight_dtype, plan.kv_dtype,
                       scheduler=plan.scheduler)
    if not mem.fits:
        raise InputError("plan", plan.describe(), f"does not fit: {mem.why_not()}")
    step = StepModel(model, cluster, pool, plan.weight_dtype, plan.kv_dtype, plan.scheduler)
    # one engine per (replica, pipeline slot, attention-DP rank); they share the cache
    per_replica = pool.pp * pool.attn_dp
    kv = mem.kv_tokens // per_replica
    seqs = max(1, pool.max_num_seqs // pool.pp)
    engines = [_Engine(start + i, pool, step, kv, mem.block_tokens, role, seqs,
                       reserve=plan.scheduler == "trtllm", decode_group=decode_group,
                       prefill_first=not plan.mixed_chunk, sglang=plan.scheduler == "sglang")
               for i in range(pool.replicas * per_replica)]
    if pool.attn_dp > 1:  # each replica's (pipeline slot's) DP ranks step together
        for k in range(0, len(engines), pool.attn_dp):
            _Team(engines[k:k + pool.attn_dp])
    return engines


def simulate(model: ModelSpec, cluster: Cluster, plan: ServePlan, traffic: Traffic,
             kv_transfer: bool = True, kv_samples: int = 400,
             decode_group: bool = True) -> SimResult:
    """Run ``traffic`` through ``plan``. ``kv_transfer=False`` makes the prefill-to-decode
    copy free (for tests and what-ifs). ``decode_group=False`` steps every request one by
    one (the reference the decode group is tested against; same result, slower)."""
    plan.check(model, cluster)
    if plan.disaggregated:
        pre = _engines_for(plan.prefill, model, cluster, plan, "prefill", 0, decode_group)
        dec = _engines_for(plan.decode, model, cluster, plan, "decode", len(pre), decode_group)
        engines = pre + dec
    else:
        pre = dec = engines = _engines_for(plan.pools[0], model, cluster, plan, "both", 0,
                                           decode_group)
    reqs = traffic.requests
    n = len(reqs)
    for e in {id(pre[0]): pre[0], id(dec[0]): dec[0]}.values():  # one engine of each pool
        # the longest request, alone in the whole cache, at its end (a lower bound on what it
        # holds while it runs): if that does not fit it never finishes
        q = max(reqs, key=lambda q: q.input_len + (q.output_len if e.role != "prefill" else 0))
        tokens = q.input_len + (q.output_len if e.role != "prefill" else 0)
        if e._demand(tokens, tokens) > e.capacity_blocks:
            raise InputError("kv cache", e.capacity_tokens,
                             f"a request of {q.input_len} prompt + {q.output_len} output tokens "
                             "does not fit the replica's KV cache")
    prefix = int(traffic.prefix_share * traffic.mean_input)
    seen_prefix = [False] * len(pre)
    heap: list = []
    seq = 0  # tie-breaker

    def push(t: float, kind: int, a, b=None) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, a, b))

    ARRIVE, STEP_END, TRANSFER, TEAM_START = 0, 1, 2, 3
    done: list[_Req] = []
    next_req = 0
    rr = 0

    def new_request(t: float, client: int) -> None:
        nonlocal next_req, rr
        q = reqs[next_req]
        next_req += 1
        e = pre[rr % len(pre)]
        rr += 1
        cached = 0
        if prefix and seen_prefix[e.idx]:
            cached = min(prefix, q.input_len - 1)
        seen_prefix[e.idx] = True
        push(t, ARRIVE, e, _Req(q.id, t, q.input_len, q.output_len, cached, client))

    if traffic.closed_loop:
        for c in range(min(traffic.concurrency, n)):
            new_request(0.0, c)
    else:
        for _ in range(n):
            new_request(reqs[next_req].arrival_s, -1)

    for e in engines:  # pin each engine's share of the shared prefix's blocks
        if prefix and e.role != "decode":
            pinned = e._demand(prefix, prefix)
            e.free -= min(pinned, e.free)
    transfer_cache: dict[int, float] = {}

    def start(e: _Engine, t: float) -> None:
        if e.team is not None:  # the ranks start together once every event at t is in
            if not e.team.pending:
                e.team.pending = True
                push(t, TEAM_START, e.team)
            return
        batch = e.schedule()
        if not batch and not e.batch_group:
            e.busy = False
            return
        dt = e.cost(batch)
        e.batch = batch
        e.busy = True
        e.iterations += 1
        e.busy_s += dt
        e.seq_sum += e.batch_group + len(batch)
        push(t + dt, STEP_END, e)

    def end_step(e: _Engine, t: float) -> None:
        account(e, t)
        if e.batch_group:
            for r in e.group_finished():
                finish(e, r, t)
        for r, k in e.batch:
            if r.todo > 0:
                r.todo -= k
                r.kv += k
                if r.todo == 0:
                    r.gen += 1
                    if math.isnan(r.first) and e.role == "both":
                        r.first = t
            else:
                r.kv += 1
                r.gen += 1
            finished = r.gen >= r.out
            if e.role == "prefill" and r.todo == 0:
                e.running.remove(r)
                e.free += r.blocks
                r.blocks = 0
                if plan.disaggregated:
                    key = r.inp
                    if key not in transfer_cache:
                        transfer_cache[key] = (kv_transfer_s(model, cluster, plan.kv_tier, key,
                                                             plan.kv_dtype, plan.prefill.tp)
                                               if kv_transfer else 0.0)
                    push(t + transfer_cache[key], TRANSFER, None, r)
                continue
            if finished:
                e.running.remove(r)
                finish(e, r, t)

    def start_team(team: _Team, t: float) -> None:
        args = []
        for m in team.members:
            m.batch = m.schedule()
            if m.batch or m.batch_group:
                args.append(m.step_args(m.batch))
        if not args:
            for m in team.members:
                m.busy = False
            return
        dt = team.members[0].step.lockstep_step_s(args)
        for m in team.members:
            m.busy = True  # (an idle rank runs the iteration with a dummy batch)
            if m.batch or m.batch_group:
                m.iterations += 1
                m.busy_s += dt
                m.seq_sum += m.batch_group + len(m.batch)
        push(t + dt, STEP_END, team)

    def finish(e: _Engine, r: _Req, t: float) -> None:
        e.free += r.blocks
        r.blocks = 0
        r.finish = t
        if math.isnan(r.first):
            r.first = t
        done.append(r)
        if traffic.closed_loop and next_req < n:
            new_request(t, r.client)

    def account(e: _Engine, t: float) -> None:
        e.area += e.load() * (t - e.last_t)
        e.last_t = t

    kv_log: list[tuple[float, float]] = []
    total_blocks = sum(e.capacity_blocks for e in engines)
    # free blocks of the whole deployment, brought up to date at each sample from the
    # engines an event touched since the last one (a sum over every engine each time made
    # clusters of thousands of GPUs crawl)
    free_total = 0
    for x in engines:
        x.free_seen = x.free
        free_total += x.free
    dirty: set = set()
    stride = 1
    events = 0
    t = 0.0
    while heap:
        t, _, kind, e, r = heapq.heappop(heap)
        if kind == ARRIVE:
            account(e, t)
            e.waiting.append(r)
            if not e.busy:
                dirty.add(e)
                start(e, t)
            continue
        if kind == TEAM_START:
            e.pending = False
            dirty.update(e.members)
            start_team(e, t)
            continue
        if kind == TRANSFER:  # cache arrives at the least-loaded decode engine
            d = min(dec, key=lambda x: (x.load(), x.idx))
            account(d, t)
            r.kv, r.todo, r.blocks = r.inp + r.gen - 1, 0, 0
            r.cached = 0
            if math.isnan(r.first):
                r.first = t
            if r.gen >= r.out:
                r.finish = t
                done.append(r)
                if traffic.closed_loop and next_req < n:
                    new_request(t, r.client)
                continue
            d.waiting.append(r)
            if not d.busy:
                dirty.add(d)
                start(d, t)
            continue
        # STEP_END
        if type(e) is _Team:
            dirty.update(e.members)
            for m in e.members:
                end_step(m, t)
        else:
            dirty.add(e)
            end_step(e, t)
        events += 1
        if events % stride == 0:
            for x in dirty:
                free_total += x.free - x.free_seen
                x.free_seen = x.free
            dirty.clear()
            used = total_blocks - free_total
            kv_log.append((t, used / total_blocks if total_blocks else 0.0))
            if len(kv_log) >= 2 * kv_samples:
                kv_log = kv_log[::2]
                stride *= 2
        if type(e) is _Team:
            start_team(e, t)
            dirty.update(e.members)  # (its next iteration took blocks after the sample)
        else:
            start(e, t)
            dirty.add(e)

    if len(done) != n:
        raise AssertionError(f"simulation lost requests: {len(done)} of {n} finished")
    done.sort(key=lambda r: r.id)
    t0 = min(r.arrival for r in done)
    end = max(r.finish for r in done)
    for x in engines:
        account(x, end)
    makespan = max(end - t0, 1e-9)
    mean_in = sum(x.area for x in engines) / makespan
    return SimResult(
        plan=plan, gpus=plan.gpus,
        arrival_s=[r.arrival - t0 for r in done], first_token_s=[r.first - t0 for r in done],
        finish_s=[r.finish - t0 for r in done], input_len=[r.inp for r in done],
        output_len=[r.out for r in done], makespan_s=makespan,
        preemptions=sum(x.preemptions for x in engines),
        iterations=sum(x.iterations for x in engines), kv_use=kv_log, mean_in_system=mean_in,
        busy_share=sum(x.busy_s for x in engines) / (makespan * len(engines)),
        engines=len(engines),
        mean_batch=sum(x.seq_sum for x in engines) / max(1, sum(x.iterations for x in engines)))
