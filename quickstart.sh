#!/usr/bin/env bash
# README command 1: install what is missing, then run the default study on the embedded lab.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$ROOT/scripts/install.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/tunelab" quickstart "${@}"
