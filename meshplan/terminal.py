"""Text from the user's files on the terminal: the one place that escapes it.

A runs CSV's ids, sources, model and GPU names are free text; printed raw, an ESC sequence in
one clears the screen, moves the cursor or recolours the table, and a bidi override reorders
what follows. ``say`` prints one line with every non-printable character (C0/C1 controls,
DEL, format characters such as U+202E) written as its Python escape (``\\x1b``, ``\\u202e``);
printable text, non-ASCII letters included, is left as it is."""

from __future__ import annotations


def shown(text: object) -> str:
    """``text`` with each non-printable character replaced by its escape."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in str(text))


def say(line: object = "") -> None:
    """Print one line of the report, escaped (``shown``)."""
    print(shown(line))
