"""Writes aiter_attention.csv: AMD's published flash-attention kernel throughputs on MI300X
(CDNA3) and MI355X (CDNA4), for the attention entries of meshplan/cost/efficiency.py and
their test (tests/test_amd_attention.py).

Source: ROCm/aiter, op_tests/cpp/mha/README.md, section "the asm kernel performance of the
attention forwards and attention backwards" (added by ROCm/aiter#1270 at a83421bee6,
2025-10-31; the MI300X and MI355X columns unchanged through e4048607a5, 2026-08-22, the commit
read here): aiter's hand-written v3 kernels (`benchmark_mha_fwd -fwd_v3=1`,
`benchmark_mha_bwd -bwd_v3=1`), BF16, BSHD, batch mode, head dim 128, GQA; TFLOP/s as printed
(a causal row counts the FLOPs it executes: its rate at 8k keys is ~0.93x the non-causal
one, not ~2x). The backward is printed twice: dQ accumulated in 16-bit atomics ("a16",
NVTE_CK_IS_V3_ATOMIC_FP32=0) and in fp32 atomics ("a32", Transformer Engine's ROCm default,
NVTE_CK_IS_V3_ATOMIC_FP32=1). Device clocks and power are not stated.

Re-run: python bench/data/make_aiter_attention.py README.md > bench/data/aiter_attention.csv
(README.md from `git show e4048607a5:op_tests/cpp/mha/README.md` in a clone of ROCm/aiter).
"""

from __future__ import annotations

import csv
import sys

SOURCE = ("ROCm/aiter op_tests/cpp/mha/README.md at e4048607a5 (table added by ROCm/aiter#1270, "
          "a83421bee6, 2025-10-31), aiter v3 asm kernels, bf16, BSHD, batch mode")
FIELDS = ("source", "gpu", "batch", "q_heads", "kv_heads", "seqlen", "head_dim", "causal",
          "fwd_tflops", "bwd_a16_tflops", "bwd_a32_tflops")


def rows(readme: str):
    # columns: batch, q_nheads, kv_nheads, seqlen_q, seqlen_kv, hdim, causal,
    # FWD MI300X, FWD MI355X, BWD-a16 MI300X, MI355X, BWD-a32 MI300X, MI355X
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 13 or not cells[0].isdigit():
            continue
        b, hq, hk, sq, sk, d, causal = cells[:7]
        if sq != sk:
            continue
        for gpu, (f, b16, b32) in (("MI300X", cells[7:13:2]), ("MI355X", cells[8:13:2])):
            yield {"source": SOURCE, "gpu": gpu, "batch": b, "q_heads": hq, "kv_heads": hk,
                   "seqlen": sq, "head_dim": d, "causal": causal, "fwd_tflops": f,
                   "bwd_a16_tflops": b16, "bwd_a32_tflops": b32}


def main() -> None:
    out = csv.DictWriter(sys.stdout, FIELDS, lineterminator="\n")
    out.writeheader()
    for r in rows(open(sys.argv[1]).read()):
        out.writerow(r)


if __name__ == "__main__":
    main()
