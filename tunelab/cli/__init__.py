"""The ``tunelab`` command. Each verb lives in its own module with ``register(subparsers)``.

A verb module's ``register`` adds a subparser and sets ``func`` (taking the parsed args and
returning an exit status). Every error a verb meets ends the same way: one line
``tunelab: error: ...`` on stderr and exit status 2, never a traceback. Errors derived from
:class:`tunelab.errors.TunelabError` carry their own message (naming the path, row or flag);
``OSError`` (full disk, read-only filesystem, a directory where a file belongs, permissions, a
name too long) and SQLite errors are translated by :func:`error_message` as a safety net, and so
are usage errors (argparse). Anything else is a bug: one line ``tunelab: internal error: ...``
and exit status 70 (``TUNELAB_DEBUG=1`` prints the traceback).
"""
from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import os
import re
import sqlite3
import sys
from typing import NoReturn, Sequence

from tunelab.version import __version__
from tunelab.cli.paths import describe_os_error
from tunelab.errors import TunelabError

#: verb modules, in the order shown by --help; a missing module is skipped so verbs can land one by one
VERB_MODULES = ["quickstart", "plan", "knobs", "lab", "run", "export", "restore", "screen", "refine", "tune", "validate", "report", "gallery"]
#: exit status of a usage or input error (the ``tunelab: error:`` line)
EXIT_ERROR = 2
#: exit status of an unexpected failure (a bug; BSD's EX_SOFTWARE)
EXIT_INTERNAL = 70
#: set to 1 to get the traceback of an internal error
DEBUG_ENV = "TUNELAB_DEBUG"
#: where the parsed arguments keep the (sub-)command that was left arguments it does not know
COMMAND_ATTR = "_tunelab_unrecognized_by"
#: argparse's message for a value outside an argument's choices (a verb, a sub-verb, --format ...)
INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>.+?) \(choose from (?P<choices>.*)\)$")


class TunelabArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one ``tunelab: error:`` line (after the usage), exit 2.

    The line names the command once (its ``--help``), and a mistyped verb or choice gets a suggestion.
    """

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, COMMAND_ATTR):   # the innermost (sub-)command left them over
            setattr(namespace, COMMAND_ATTR, self)
        return namespace, extras

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse's, but an unrecognized argument is reported by the verb that was given it."""
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            getattr(namespace, COMMAND_ATTR, self).error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"tunelab: error: {with_suggestion(message)} (see `{self.prog} --help`)\n")


def with_suggestion(message: str) -> str:
    """argparse's ``message``, plus ``did you mean ...?`` when it refuses a choice close to a valid one.

    >>> with_suggestion("argument VERB: invalid choice: 'plna' (choose from 'plan', 'run')")
    "argument VERB: invalid choice: 'plna' (choose from 'plan', 'run'); did you mean 'plan'?"
    >>> with_suggestion("argument VERB: invalid choice: 'zzz' (choose from 'plan', 'run')")
    "argument VERB: invalid choice: 'zzz' (choose from 'plan', 'run')"
    """
    refused = INVALID_CHOICE.search(message)
    if refused is None:
        return message
    try:
        value = ast.literal_eval(refused["value"])
        choices = [str(choice) for choice in ast.literal_eval(f"[{refused['choices']}]")]
    except (ValueError, SyntaxError):   # a choice whose repr is not a literal: no suggestion
        return message
    close = difflib.get_close_matches(str(value), choices, n=3)
    if not close:
        return message
    return f"{message}; did you mean {' or '.join(repr(c) for c in close)}?"


def error_message(exc: BaseException) -> str | None:
    """The one-line message for an error a verb may meet, or ``None`` when it is unexpected (a bug)."""
    if isinstance(exc, TunelabError):
        return str(exc)
    if isinstance(exc, OSError):
        return describe_os_error(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
        return (f"a trial store is locked by another process ({exc}); wait for it to finish or stop it, "
                "then retry")
    if isinstance(exc, sqlite3.DatabaseError):
        return f"a trial store is damaged or not a tunelab store ({exc}); use the original file or rerun the study"
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = TunelabArgumentParser(
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
    except KeyboardInterrupt as exc:      # a run's RunInterrupted says what it put back
        print(f"tunelab: {exc or 'interrupted'}", file=sys.stderr)
        return 130
    except BrokenPipeError:   # output piped into `head` and the like: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI's single error path
        return _report(exc)


def _report(exc: Exception) -> int:
    """Print one line for ``exc`` and return the exit status (2, or 70 for a bug)."""
    message = error_message(exc)
    if message is not None:
        print(f"tunelab: error: {' '.join(message.splitlines())}", file=sys.stderr)
        return EXIT_ERROR
    if os.environ.get(DEBUG_ENV) == "1":
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    text = " ".join(str(exc).splitlines())[:500]
    print(f"tunelab: internal error: {type(exc).__name__}: {text} (set {DEBUG_ENV}=1 for the traceback; "
          "please report it)", file=sys.stderr)
    return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
