"""Subcommands of the CLI, one module each (see meshplan/cli.py)."""
