"""Errors the user can cause, as opposed to bugs (which stay plain assertions)."""

from __future__ import annotations

import difflib
import re


class InputError(ValueError):
    """Bad user input: names the field, the value given, and what is allowed.

    The CLI prints ``str(err)`` as one line and exits with code 2.
    """

    def __init__(self, field: str, value: object, allowed: str):
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r}: {allowed}")



class NoPlanFits(RuntimeError):
    """Valid input on which no plan fits (the model does not fit the GPUs at any layout).

    The CLI prints ``str(err)`` as one line and exits with code 1, as ``meshplan plan`` does
    when every plan is rejected; exit code 2 stays for input that is wrong in itself.
    """


class RunFailed(RuntimeError):
    """A launched run failed on the workers (a bug or a crash there, not bad input).

    The CLI prints ``str(err)`` as one line (the failing rank's last error and where the full
    log is) and exits with code 1.
    """

def require_positive_int(field: str, value: object) -> int:
    """Return ``value`` as an int, or raise InputError unless it is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and value.strip().lstrip("+").isdigit():
            value = int(value)
        else:
            raise InputError(field, value, "must be a positive integer")
    if value < 1:
        raise InputError(field, value, "must be a positive integer")
    return value


def require_nonneg_int(field: str, value: object) -> int:
    """Return ``value`` as an int, or raise InputError unless it is an integer >= 0."""
    if value == 0 and not isinstance(value, bool):
        return 0
    try:
        return require_positive_int(field, value)
    except InputError:
        raise InputError(field, value, "must be an integer >= 0") from None


def _squash(text: str) -> str:
    """Lower case, letters and digits only: 'Llama-3.1-8B' and 'llama3.1-8b' squash alike."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


def suggestions(value: object, names, cutoff: float = 0.75) -> list[str]:
    """The names a mistyped ``value`` most likely meant, best first (at most three): those
    equal to it or starting with it once case and punctuation are dropped ('H100' ->
    H100-SXM-80GB, H100-SXM-96GB-500W), those it holds whole ('meta-llama/Llama-3.1-70B' ->
    llama3.1-70b), else the closest spellings (difflib ratio >= ``cutoff``) with the same
    digits."""
    v = _squash(str(value))
    if not v:
        return []
    names = list(names)
    squashed = {n: _squash(n) for n in names}
    hits = [n for n in names if squashed[n] == v]
    hits += [n for n in names if squashed[n].startswith(v) and n not in hits]
    hits += [n for n in names if len(squashed[n]) >= 3 and squashed[n] in v and n not in hits]
    if hits:
        return hits[:3]
    by_squash: dict[str, list[str]] = {}
    for n in names:
        by_squash.setdefault(squashed[n], []).append(n)
    digits = re.sub(r"[^0-9]", "", v)  # a spelling slip keeps the numbers: v2 is not v3
    close = [c for c in difflib.get_close_matches(v, list(by_squash), n=3, cutoff=cutoff)
             if re.sub(r"[^0-9]", "", c) == digits]
    return [n for c in close for n in by_squash[c]][:3]


def did_you_mean(value: object, names, cutoff: float = 0.75) -> str:
    """'did you mean A or B? ' for InputError's allowed text, or '' when nothing is close."""
    near = suggestions(value, names, cutoff)
    if not near:
        return ""
    return "did you mean " + (", ".join(near[:-1]) + " or " + near[-1] if len(near) > 1
                              else near[0]) + "? "


def require_choice(field: str, value: object, allowed: tuple[str, ...] | list[str]) -> str:
    """Return ``value`` (lower-cased) if it is one of ``allowed``, else raise InputError
    (naming the closest allowed values first, where one is close)."""
    v = str(value).strip().lower()
    if v not in allowed:
        raise InputError(field, value, did_you_mean(value, allowed) + "allowed: "
                         + ", ".join(allowed))
    return v


def require_bool(field: str, value: object) -> bool:
    """Return ``value`` if it is a bool (true/false in TOML and JSON), else raise InputError.

    Strings such as "false" are refused: bool("false") is True, the opposite of what was meant."""
    if not isinstance(value, bool):
        raise InputError(field, value, "must be true or false (a boolean, not a string or number)")
    return value


def require_positive_number(field: str, value: object, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is a finite number > 0 (>= 0 with allow_zero)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(field, value, "must be a number")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise InputError(field, value, "must be a finite number " + (">= 0" if allow_zero else "> 0"))
    return v


def require_plain_text(field: str, value: object) -> str:
    """A name that meshplan writes into generated scripts and TOML (a model name, a model id):
    refused with control characters (a newline would start a new shell line or TOML key)."""
    text = str(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InputError(field, text, "must not contain control characters (newline, tab, ...)")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):  # bytes of argv that are not UTF-8:
        # no file can hold them as text (a UnicodeEncodeError when the script is written)
        raise InputError(field, text.encode("utf-8", "surrogateescape").decode(
            "utf-8", "backslashreplace"), "must be UTF-8 text")
    return text
