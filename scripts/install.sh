#!/usr/bin/env bash
# Install what is missing, idempotently: Debian packages (when root) and a venv in .venv with the
# pinned Python dependencies. Sourced by quickstart.sh and run-tests.sh; safe to run again.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"

# Debian packages the lab and the tests need. Each is installed only if missing.
DEBIAN_PACKAGES=(iproute2 procps util-linux dnsperf iperf3 nsd bind9 bind9-utils knot knot-dnssecutils unbound nginx fio wrk stress-ng openssh-server openssh-client sudo chromium)

install_debian_packages() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "install: not root (or no apt-get): skipping Debian packages; lab tests will be skipped" >&2
        return 0
    fi
    local missing=()
    for pkg in "${DEBIAN_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "install: Debian packages: ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    # Debian starts services on install; the lab runs its own instances, so stop the system ones.
    for svc in nsd ssh iperf3 nginx named knot unbound; do
        if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
            systemctl stop "$svc" || true
        fi
    done
}

# Optional extras to install besides "test", comma-separated: TUNELAB_EXTRAS=gp adds PyTorch (~750 MB) for
# the gp search engine. The default (and CI) installs none: the gp tests are then skipped, saying so.
EXTRAS="test${TUNELAB_EXTRAS:+,$TUNELAB_EXTRAS}"

install_python_packages() {
    local stamp="$VENV/.tunelab-installed"
    local want
    want="$( (cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt"; echo "$EXTRAS") | sha256sum | cut -d' ' -f1)"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "install: creating $VENV" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "install: Python dependencies (pinned) into $VENV: tunelab[$EXTRAS]" >&2
        "$VENV/bin/python" -m pip install -q --upgrade pip
        "$VENV/bin/python" -m pip install -q -c "$ROOT/constraints.txt" -e "$ROOT[$EXTRAS]"
        echo "$want" > "$stamp"
    fi
    if [[ ",$EXTRAS," != *",gp,"* ]] && compgen -G "$VENV/lib/python*/site-packages/torch" >/dev/null; then
        echo "install: torch (~750 MB, only for the gp engine) is left in $VENV from an earlier install;" \
             "remove it with: $VENV/bin/python -m pip uninstall -y torch sympy mpmath networkx filelock" >&2
    fi
}

install_debian_packages
install_python_packages
