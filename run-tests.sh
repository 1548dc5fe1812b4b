#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, then run the whole test suite.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$ROOT/scripts/install.sh" || exit 1
cd "$ROOT"
"$ROOT/.venv/bin/python" -m pytest "$@"
status=$?
if [ "$status" = 5 ]; then
    echo "run-tests: pytest collected no tests; that is a failure here" >&2
    exit 1
fi
exit "$status"
