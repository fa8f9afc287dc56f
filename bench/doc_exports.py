"""Regenerate the command output and file listings of docs/exports.md (so they cannot go stale).

    python bench/doc_exports.py          (rewrite the marked blocks of docs/exports.md)
    python bench/doc_exports.py --check  (exit 1 if a block differs from what the build writes)

Each block between ``<!-- generated:export-NAME -->`` and ``<!-- /generated:export-NAME -->``
holds the commands of that section, what they printed, and every file they wrote, in full.
The commands run in a temporary folder, so relative paths (plan70b/plan.toml) work as shown.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from meshplan.cli import main  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from readme_examples import replace_block  # noqa: E402

SCENARIO_70B = ("--model llama3.1-70b --gpus 64xH100-SXM-80GB --seq-len 8192 "
                "--global-batch 512")
# name -> (commands, files shown: (path, fence language))
SECTIONS = {
    "meshplan": ([f"export {SCENARIO_70B} --dp 2 --tp 8 --pp 4 --vpp 2 --recompute selective "
                  "--to meshplan --out plan70b"],
                 [("plan70b/plan.toml", "toml")]),
    "megatron": (["export plan70b/plan.toml --to megatron --out megatron"],
                 [("megatron/megatron_launch.sh", "bash")]),
    "torchtitan": (["export plan70b/plan.toml --to torchtitan --out titan",
                    "export plan70b/plan.toml --zero 3 --to torchtitan --out titan"],
                   [("titan/torchtitan_job.py", "python"), ("titan/torchtitan_launch.sh", "bash")]),
    "deepspeed": (["export --model llama3.1-8b --gpus 16xH100-SXM-80GB --seq-len 8192 "
                   "--global-batch 64 --dp 16 --zero 3 --offload-optimizer --recompute full "
                   "--to deepspeed --out ds"],
                  [("ds/ds_config.json", "json"), ("ds/deepspeed_launch.sh", "bash")]),
    "refused": (["export plan70b/plan.toml --pp 8 --vpp 2 --dp 1 --schedule zb_v --to megatron "
                 "--out bad"], []),
}
ORDER = ("meshplan", "megatron", "torchtitan", "deepspeed", "refused")  # refused needs plan70b


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue() + err.getvalue()


def _wrap(cmd: str, width: int = 96) -> str:
    """``$ meshplan CMD`` folded with backslashes at about ``width`` characters."""
    lines, cur = [], "$ meshplan"
    for word in shlex.split(cmd):
        if len(cur) + 1 + len(word) > width:
            lines.append(cur + " \\")
            cur = "    " + word
        else:
            cur += " " + word
    return "\n".join(lines + [cur])


def blocks() -> dict[str, str]:
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = os.getcwd()
        os.chdir(tmp)
        try:
            for name in ORDER:
                cmds, files = SECTIONS[name]
                shown = []
                for cmd in cmds:
                    _, text = _run(shlex.split(cmd))
                    text = text.replace(str(Path(tmp).resolve()) + "/", "").replace(tmp + "/", "")
                    shown += [_wrap(cmd), text.rstrip()]
                parts = ["```", *[s for s in shown if s], "```"]
                for path, lang in files:
                    parts += [f"```{lang}", Path(path).read_text().rstrip(), "```"]
                out[name] = "\n".join(parts)
        finally:
            os.chdir(old)
    return out


def rewrite(path: Path, check: bool = False) -> bool:
    text = new = path.read_text()
    for name, body in blocks().items():
        new = replace_block(new, f"export-{name}", body, path)
    if not check:
        path.write_text(new)
    return new == text


if __name__ == "__main__":
    same = rewrite(ROOT / "docs" / "exports.md", check="--check" in sys.argv)
    sys.exit(0 if same or "--check" not in sys.argv else 1)
