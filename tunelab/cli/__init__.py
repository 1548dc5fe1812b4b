"""The ``tunelab`` command. Each verb lives in its own module with ``register(subparsers)``.

A verb module's ``register`` adds a subparser and sets ``func`` (taking the parsed args and
returning an exit status). Errors derived from :class:`tunelab.errors.TunelabError` are printed
as ``tunelab: error: ...`` and exit with status 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from tunelab import __version__
from tunelab.errors import TunelabError

#: verb modules, in the order shown by --help; a missing module is skipped so verbs can land one by one
VERB_MODULES = ["quickstart", "plan", "knobs", "lab", "run", "export", "restore", "screen", "refine", "validate", "report"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tunelab",
        description="Statistically sound tuning of Linux kernel knobs: design, run, screen, refine, report.",
    )
    parser.add_argument("--version", action="version", version=f"tunelab {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name in VERB_MODULES:
        try:
            module = importlib.import_module(f"tunelab.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tunelab.cli.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TunelabError as exc:
        print(f"tunelab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tunelab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # output piped into `head` and the like: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
