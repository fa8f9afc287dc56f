"""The README's meshplan commands still parse: every command in a fenced block (plain or
after a '$ ' prompt, continued with '\\', or after '&&') goes through meshplan's own
argument parser. Synopsis lines (words holding '|' or '[') are skipped."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from meshplan.cli import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_commands(text: str) -> list[tuple[int, list[str]]]:
    out, fenced, pending, start = [], False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced, pending = not fenced, ""
            continue
        if not fenced:
            continue
        if pending:
            pending += " " + line.strip()
        else:
            s = line.strip().removeprefix("$ ")
            first = s.split("&&")[-1].strip() if "&& meshplan " in s else s
            if not first.startswith("meshplan ") or first.split()[1].endswith(":"):
                continue  # prose, or an error line a command printed
            pending, start = s, n
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        for part in pending.split("&&"):
            words = shlex.split(part, comments=True)
            if words and words[0] == "meshplan" and not any("|" in w or "[" in w for w in words):
                out.append((start, words[1:]))
        pending = ""
    return out


def test_the_check_can_fail():
    cmds = readme_commands("```bash\n$ meshplan plan --model x \\\n  --gpuz 8xH100\n```\n")
    assert cmds == [(2, ["plan", "--model", "x", "--gpuz", "8xH100"])]
    with pytest.raises(SystemExit):
        build_parser().parse_args(cmds[0][1])


def test_readme_commands_parse():
    if not README.exists():
        pytest.skip("README.md not found beside tests/")
    cmds = readme_commands(README.read_text())
    assert cmds, "no meshplan command found in README.md"
    parser = build_parser()
    for line, argv in cmds:
        try:
            parser.parse_args(argv)
        except SystemExit as e:
            pytest.fail(f"README.md line {line}: meshplan {' '.join(argv)} does not parse ({e})")
