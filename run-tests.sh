#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, then run the whole test suite.
#
# Two phases: every test not marked `serial` on one pytest-xdist worker per core (at most 4; tests that share an
# expensive session fixture stay on one worker: `xdist_group`), then the few `serial` tests that need the machine
# to themselves (`tunelab lab down --all` removes every lab, so no other test may have one up). Extra arguments go
# to both phases. pytest's "no tests ran" (exit 5) is a failure here unless the other phase ran tests.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$ROOT/scripts/install.sh" || exit 1
cd "$ROOT"
cores="$(nproc 2>/dev/null || echo 2)"
workers=$(( cores < 4 ? cores : 4 ))
"$ROOT/.venv/bin/python" -m pytest -n "$workers" --dist loadgroup -m "not serial" "$@"
parallel=$?
"$ROOT/.venv/bin/python" -m pytest -n 0 -m serial "$@"
serial=$?
if [ "$parallel" = 5 ] && [ "$serial" = 5 ]; then
    echo "run-tests: pytest collected no tests; that is a failure here" >&2
    exit 1
fi
for status in "$parallel" "$serial"; do
    if [ "$status" != 0 ] && [ "$status" != 5 ]; then
        exit "$status"
    fi
done
exit 0
