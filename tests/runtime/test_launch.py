"""The fork launcher names the rank that failed first, not the peers that lost it.

When one rank raises, it closes its process group on the way out and its peers then fail
inside a collective with a closed connection; their reports may reach the parent first
(here made certain: rank 1 closes its group a second before it raises).
A report that leads with a peer's symptom hides the cause (as a CI run did once: only
"Connection closed by peer" was shown). These runs make both orders possible and check the
cause comes first either way; and a rank killed by a signal is named with its signal.
"""

import os
import signal

import pytest

from meshplan.runtime.launch import RankCrashed, fork_ranks

pytestmark = pytest.mark.slow


def _rank1_raises(rank, world):
    import time

    import torch
    import torch.distributed as dist
    if rank == 1:
        # the order that hid the cause, made certain: the connection closes, the report is late
        dist.destroy_process_group()
        time.sleep(1.0)
        raise ValueError("the cause: rank 1's own error")
    dist.all_reduce(torch.ones(4))  # waits for rank 1, whose connection then closes
    return rank


def _rank1_killed(rank, world):
    import torch
    import torch.distributed as dist
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(torch.ones(4))
    return rank


def test_cause_comes_before_peer_symptoms():
    with pytest.raises(RuntimeError) as info:
        fork_ranks(_rank1_raises, 3, timeout_s=60)
    text = str(info.value)
    assert not isinstance(info.value, RankCrashed)  # a Python error: never retried
    assert text.startswith("rank 1 failed:"), text[:300]
    assert "the cause: rank 1's own error" in text
    # the peers' reports, when they came, follow the cause and are marked as symptoms
    for peer in ("rank 0 failed", "rank 2 failed"):
        if peer in text:
            assert text.index(peer) > text.index("rank 1 failed:")
            assert f"{peer} (a peer went away first)" in text


def test_rank_killed_by_signal_is_named():
    with pytest.raises(RankCrashed) as info:
        fork_ranks(_rank1_killed, 2, timeout_s=60)
    text = str(info.value)
    assert f"1: {-signal.SIGKILL}" in text or "rank(s) [1] died" in text, text[:300]
