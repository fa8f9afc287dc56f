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

    def _get_values(self, action: argparse.Action, arg_strings: list[str]):
        # A blank value (--scenario "", --out=, an unset shell variable) is refused here, for
        # every argument of every command: the commands test `if args.x` / `args.x or ...`,
        # which read it as not given (the file's, the default's or nothing) without a word.
        # (_get_values is argparse's private hook, called once per argument and value list in
        # Python 3.11-3.13; tests/test_bad_input.py's blank cases fail if that changes)
        if len(arg_strings) == 1 and not arg_strings[0].strip():
            name = action.option_strings[-1] if action.option_strings else (
                action.metavar or action.dest)
            what = ("one of " + ", ".join(map(str, action.choices)) if action.choices
                    else action.metavar if action.option_strings and action.metavar
                    else "a value")
            e = InputError(name, arg_strings[0], f"is blank; give {what}" + (
                f" or leave {name} out" if action.option_strings and not action.required
                else ""))
            e.prog = self.prog  # "meshplan export": _main prints it as any InputError
            raise e
        return super()._get_values(action, arg_strings)


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
    try:
        args = parser.parse_args(argv)
    except InputError as e:  # a blank value (_Parser._get_values)
        print(f"{getattr(e, 'prog', 'meshplan')}: error: {e}", file=sys.stderr)
        return 2
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
