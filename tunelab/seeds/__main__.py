"""``python -m tunelab.seeds``: the same command as ``tunelab gallery`` (same arguments, same body).

The seeds layer sits below the CLI, so this entry point parses with the gallery's own
:func:`~tunelab.seeds.gallery.add_arguments` and reports errors the way the CLI does: one line
``tunelab: error: ...`` and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import sqlite3
import sys
from typing import Sequence

from tunelab.errors import TunelabError
from tunelab.seeds import gallery


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tunelab.seeds", description=gallery.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    gallery.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        index = gallery.gallery_command(args)
    except KeyboardInterrupt:
        print("tunelab: interrupted", file=sys.stderr)
        return 130
    except (TunelabError, OSError) as exc:
        print(f"tunelab: error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as exc:
        print(f"tunelab: error: a seed store is damaged or not a tunelab store ({exc}); restore it from git "
              "(data/examples/seeds) or record it again", file=sys.stderr)
        return 2
    print(f"gallery written: {index}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
