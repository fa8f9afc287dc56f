"""Device copy through b.copy_(a) and through element-wise kernels (a x 1, a + 0), timed in
CUDA graphs (calibrate.micro.kernel_s) and back to back (bench/gpu_kernels.py's timer), at
256 MiB-4 GiB; prints GB/s (read + written). Run from the repository root on a GPU machine:
    python bench/data/measured/h100_2026-11-27/copycheck.py
"""
import sys, torch
sys.path.insert(0, '.')
sys.path.insert(0, 'bench')
from meshplan.calibrate.micro import kernel_s
from gpu_kernels import timer
t = timer(torch, 'cuda')
for mib in (256, 1024, 4096):
    n = mib * 2**20 // 2
    a = torch.ones(n, device='cuda', dtype=torch.bfloat16); b = torch.empty_like(a)
    res = {}
    for name, fn in (('copy_', lambda: b.copy_(a)), ('mul1', lambda: torch.mul(a, 1, out=b)),
                     ('add0', lambda: torch.add(a, 0, out=b))):
        res[name + '_graph'] = 2 * 2 * n / kernel_s(fn, 'cuda', 3, 10) / 1e9
        res[name + '_eager'] = 2 * 2 * n / t(fn) / 1e9
    print(mib, 'MiB', {k: round(v) for k, v in res.items()}, flush=True)
