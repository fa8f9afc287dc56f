"""Errors the user can cause, as opposed to bugs (which stay plain assertions)."""

from __future__ import annotations


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


def require_choice(field: str, value: object, allowed: tuple[str, ...] | list[str]) -> str:
    """Return ``value`` (lower-cased) if it is one of ``allowed``, else raise InputError."""
    v = str(value).strip().lower()
    if v not in allowed:
        raise InputError(field, value, "allowed: " + ", ".join(allowed))
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
    return text
