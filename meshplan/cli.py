"""The ``meshplan`` command: thin. Parses, calls, prints.

Each subcommand lives in ``meshplan/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func``; modules there are found
automatically. Any InputError becomes one line on stderr and exit code 2; NoPlanFits (valid
input on which nothing fits) one line and exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import __version__, commands
from .errors import InputError, NoPlanFits, RunFailed
from .inputs import forget_all


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="meshplan", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"meshplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{commands.__name__}.{info.name}")
        mod.register(sub)
    return parser


def _tolerant_streams() -> None:
    """Text that the terminal's encoding cannot show (a non-ASCII model name under an ASCII
    locale) is written escaped instead of raising UnicodeEncodeError mid-report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: leave it
                pass


def main(argv: list[str] | None = None) -> int:
    _tolerant_streams()
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C: one line, exit 130 (128 + SIGINT), no traceback
        cmd = next((a for a in (argv if argv is not None else sys.argv[1:])
                    if not a.startswith("-")), "")
        print(f"meshplan{' ' + cmd if cmd else ''}: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None = None) -> int:
    forget_all()  # the files the previous command in this process read
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
    except InputError as e:
        print(f"meshplan {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (RunFailed, NoPlanFits) as e:
        print(f"meshplan {args.command}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
