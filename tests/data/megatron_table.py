"""Regenerate megatron_lm_arguments.tsv from Megatron-LM's megatron/training/arguments.py.

    python tests/data/megatron_table.py PATH/TO/arguments.py COMMIT OLD.tsv > NEW.tsv

megatron-core's wheel ships no ``megatron.training`` (the parser lives in Megatron-LM's
repository and imports half of it), so the tests rebuild the parser from a table. The
table was first read by hand from commit 000c4ac (its rows are kept: at newer commits many
options come from dataclasses through argument_utils, not literal calls); this script adds
every literal ``add_argument`` call of a newer arguments.py that the table lacks, and the
type (int/float) of every option such a call declares.
"""

from __future__ import annotations

import ast
import sys


def rows(source: str):
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        opts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        opts = [o for o in opts if o.startswith("--")]
        if not opts:
            continue
        kw = {k.arg: k.value for k in node.keywords}
        action = kw.get("action")
        action = action.value if isinstance(action, ast.Constant) else None
        nargs = kw.get("nargs")
        nargs = nargs.value if isinstance(nargs, ast.Constant) else None
        typ = kw.get("type")
        typ = typ.id if isinstance(typ, ast.Name) and typ.id in ("int", "float") else ""
        choices = ""
        if "choices" in kw:
            try:
                choices = ",".join(str(c) for c in ast.literal_eval(kw["choices"]))
            except ValueError:
                choices = ""
        dest = kw.get("dest")
        dest = dest.value if isinstance(dest, ast.Constant) else opts[0][2:].replace("-", "_")
        if action == "store_true":
            kind = "flag"
        elif action == "store_false":
            kind = "noflag"
        elif action is not None and action != "store":
            continue  # append/count/custom actions: not used by the exports
        elif nargs in ("+", "*"):
            kind = "list"
        else:
            kind = "value"
        for o in opts:
            yield o, kind, dest, choices, typ


def main(path: str, commit: str, old: str) -> None:
    new = {}
    for r in rows(open(path).read()):
        new.setdefault(r[0], r)
    kept = []
    for line in open(old).read().splitlines():
        if not line or line.startswith("#"):
            continue
        opt, kind, dest, choices = (line.split("\t") + ["", "", ""])[:4]
        typ = new[opt][4] if opt in new and new[opt][1] == kind else ""
        kept.append((opt, kind, dest, choices, typ))
    have = {r[0] for r in kept}
    print("# Megatron-LM pretrain_gpt.py arguments, from megatron/training/arguments.py of")
    print("# NVIDIA/Megatron-LM: read by hand at commit 000c4ac24f61159c138b0975def722c65245983c,")
    print(f"# then every literal add_argument call at commit {commit} added")
    print("# (with its int/float type) by tests/data/megatron_table.py.")
    print("# Columns: option<TAB>kind<TAB>dest<TAB>choices<TAB>type. kind: flag (store_true),")
    print("# noflag (store_false), value (one value), list (nargs='+' or '*'). choices: comma")
    print("# separated, empty = any. type: int, float or empty (a string).")
    for r in kept + [r for o, r in new.items() if o not in have]:
        print("\t".join(r))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
