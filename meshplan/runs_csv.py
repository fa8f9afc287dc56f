"""Reading a runs CSV (the schema of ``../shared/validation/README.md``) without guessing.

The file: columns in any order, unknown columns ignored, a missing optional column is blank,
a UTF-8 byte-order mark and CRLF line ends are accepted. A file that cannot be read, has no
data rows or lacks a required column is refused as a whole (InputError: one line, exit 2).

A row: every value is checked before it is used. A count that is not a whole number (24.5),
a value that is not finite (nan, inf), a measured value that is not positive, or a required
field left blank makes the row fail with the field named (InputError); the caller lists it
and leaves it out of the statistics.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from .errors import InputError
from .inputs import read_input

# Needed in the header of every file: the cluster and the workload. The model's shape may
# come from a preset named in `model` instead of the shape columns (see row_model.py).
REQUIRED_COLUMNS = ("gpu", "num_gpus", "seq_len", "global_batch_seqs")
SHAPE_COLUMNS = ("layers", "hidden", "heads", "vocab")
MEASURED = ("measured_tokens_per_s_per_gpu", "measured_step_time_s", "measured_peak_mem_gib")
_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f"}


# the runs CSV's trust grades (shared/validation/README.md; "" = not graded)
TRUST_GRADES = ("A", "B", "C", "")


def counted(trust: str, grades: str = "AB") -> bool:
    """Whether a row of grade ``trust`` counts in a summary of the ``grades`` rows: a row of
    one of them (any case), or an ungraded one (blank: the grade a source did not give)."""
    t = (trust or "").strip().upper()
    return t in grades.upper() if t else True

# key under which read_csv marks a row with more cells than its header (the reader that
# predicts rows refuses that row alone: validate.predict_row); never a header name, which
# are stripped text
EXTRA_FIELDS = "\x00extra"


def read_csv(path: str | Path, field: str = "csv") -> tuple[list[str], list[dict]]:
    """(header, data rows) of any CSV meshplan reads: UTF-8 with or without BOM, LF or CRLF,
    header names stripped and lower-cased, values stripped (blank = ""), blank lines skipped.
    ``field`` names the input in errors (a file that cannot be read, is not UTF-8 or is not
    CSV)."""
    try:
        raw = read_input(path, field)
    except OSError as e:
        raise InputError(field, str(path), f"cannot read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(field, str(path), "not UTF-8 text") from None
    # strict: a quote that never closes is an error, not a field that swallows the rest of
    # the file (csv's default reads to the end of the data inside the quotes)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    start = 1  # the line the record being read starts on
    try:
        header = [(h or "").strip().lstrip("\ufeff").lower() for h in (reader.fieldnames or [])]
        # a column named twice would silently take the last one's values
        dup = sorted({h for h in header if h and header.count(h) > 1})
        if dup:
            raise InputError(field, str(path), "column named more than once: " + ", ".join(dup))
        reader.fieldnames = header
        start = reader.line_num + 1
        rows = []
        for r in reader:
            d = {k: (v or "").strip() if isinstance(v, str) else "" for k, v in r.items()
                 if k is not None}
            extra = [v for v in (r.get(None) or []) if (v or "").strip()]
            if extra:  # more cells than the header names: the row's cells are shifted
                d[EXTRA_FIELDS] = f"line {reader.line_num}: {len(extra)} more non-blank " \
                                  "field(s) than the header (an unquoted comma?)"
            if any(d.values()):  # skip blank lines (",,,,")
                rows.append(d)
            start = reader.line_num + 1
    except csv.Error as e:
        raise InputError(field, str(path), _malformed(text, start, e)) from None
    return header, rows


def _malformed(text: str, start: int, err: csv.Error) -> str:
    """What is wrong with a file csv refuses, naming the line where the bad record starts
    (its text, shortened) and what is allowed."""
    lines = text.splitlines()
    line = lines[start - 1] if 0 < start <= len(lines) else ""
    shown = line if len(line) <= 60 else line[:57] + "..."
    if "end of data" in str(err):
        return (f"malformed CSV: line {start} ({shown!r}) opens a quote that never closes, "
                "so it would swallow the rest of the file; a quoted value must end with a "
                "closing \" (write a literal quote as \"\")")
    return (f"malformed CSV: line {start} ({shown!r}): {err}; a quoted value must end with a "
            "closing \" followed by a comma or the line end")


def unread_measured_columns(header: list[str], measured: tuple[str, ...] = MEASURED,
                            known: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """[(column, the measured column it resembles)] for header columns that are not the
    schema's but look like a misspelt measured column ("tokens_per_s_per_gpu",
    "step_time_s", "peak_mem_gib"): unknown columns are ignored, so their figures would
    be read as not measured without a word. ``measured``: the schema's measured columns
    (the training schema's by default; the serving schema passes its own), ``known``: other
    columns it reads that may resemble one."""
    import difflib

    out = []
    for col in header:
        if not col or col in measured or col in KNOWN_NOT_MEASURED or col in known:
            continue
        near = difflib.get_close_matches(col, measured, n=1, cutoff=0.7)
        if near:
            out.append((col, near[0]))
    return out


# columns meshplan reads that resemble a measured column's name (never reported as unread)
KNOWN_NOT_MEASURED = ("measured_noise", "measured_speedup")


def duplicate_ids(ids) -> dict[str, int]:
    """{id: rows} for each id several rows share (each row is still predicted and scored,
    but what joins the report to the file is ambiguous)."""
    from collections import Counter
    return {i: n for i, n in Counter(ids).items() if n > 1}


def read_rows(path: str | Path) -> list[dict]:
    """The data rows of a runs CSV as dicts of stripped strings (blank = "")."""
    return read_rows_and_header(path)[0]


def read_rows_and_header(path: str | Path) -> tuple[list[dict], list[str]]:
    """(read_rows, the header's column names as read: stripped, lower case)."""
    header, rows = read_csv(path)
    if not header:
        raise InputError("csv", str(path), "is empty (no header line)")
    for col in REQUIRED_COLUMNS:
        if col not in header:
            raise InputError(col, None, f"required column missing from {path}")
    if "model" not in header:
        for col in SHAPE_COLUMNS:
            if col not in header:
                raise InputError(col, None, f"required column missing from {path} "
                                 "(or give a `model` column naming a preset)")
    if not rows:
        raise InputError("csv", str(path), "has no data rows")
    for i, r in enumerate(rows, 1):
        for col in header:
            r.setdefault(col, "")
        r.setdefault("id", str(i))
        if not r["id"]:
            r["id"] = str(i)
    return rows, header


def text(row: dict, key: str) -> str:
    return (row.get(key) or "").strip()


def number(row: dict, key: str, required: bool = False) -> float | None:
    """A finite number, or None when blank (InputError when required)."""
    v = text(row, key)
    if v == "":
        if required:
            raise InputError(key, "", "required (blank)")
        return None
    try:
        x = float(v.replace("_", ""))
    except ValueError:
        raise InputError(key, v, "must be a number") from None
    if not math.isfinite(x):
        raise InputError(key, v, "must be a finite number")
    return x


def count(row: dict, key: str, required: bool = False, minimum: int = 0) -> int | None:
    """A whole number >= minimum (24.0 is 24; 24.5 fails), or None when blank."""
    x = number(row, key, required)
    if x is None:
        return None
    if not x.is_integer():
        raise InputError(key, text(row, key), "must be a whole number")
    if x < minimum:
        raise InputError(key, text(row, key), f"must be >= {minimum}")
    return int(x)


def flag(row: dict, key: str) -> bool | None:
    v = text(row, key).lower()
    if v == "":
        return None
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    try:
        x = float(v)
    except ValueError:
        x = None
    if x == 1.0:
        return True
    if x == 0.0:
        return False
    raise InputError(key, text(row, key), "must be 0 or 1")


def measured(row: dict, key: str) -> float | None:
    """A measured value: blank (not stated) or a finite positive number."""
    x = number(row, key)
    if x is not None and x <= 0:
        raise InputError(key, text(row, key), "a measured value must be positive")
    return x
