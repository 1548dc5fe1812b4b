#!/usr/bin/env bash
# Install what is missing, idempotently: Debian packages (when root) and a venv in .venv with the
# pinned Python dependencies. Run by quickstart.sh and run-tests.sh; safe to run again.
#
# It never stops, starts or restarts a service: the services of the packages it installs are kept
# from starting (policy-rc.d, below) and a service that was running keeps running. The lab runs its
# own servers (nsd, named, knot, unbound, nginx, iperf3, the tests' sshd) in its own network
# namespaces, bound to the lab's addresses, with their pid files, sockets and logs in the lab's work
# directory (tunelab/targets/dns_servers.py, services.py, lab.py), so a system instance is no conflict.
#
# Environment: TUNELAB_SKIP_PYTHON=1 installs only the Debian packages (tests/test_install.py; the
# venv is left alone); TUNELAB_POLICY_RC_D is where policy-rc.d lives (default /usr/sbin/policy-rc.d,
# the path invoke-rc.d and deb-systemd-invoke read; tests point it elsewhere).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"

# Debian packages the lab and the tests need. Each is installed only if missing.
DEBIAN_PACKAGES=(iproute2 procps util-linux dnsperf iperf3 nsd bind9 bind9-utils knot knot-dnssecutils unbound nginx fio wrk stress-ng openssh-server openssh-client sudo chromium)

POLICY_RC_D="${TUNELAB_POLICY_RC_D:-/usr/sbin/policy-rc.d}"
SAVED_POLICY="$POLICY_RC_D.tunelab-saved"     # the machine's own policy-rc.d while apt-get runs
NO_POLICY="$POLICY_RC_D.tunelab-none"         # marker: the machine had none
OUR_POLICY_TAG="# tunelab scripts/install.sh: no service starts while it installs packages"

# While apt-get installs, /usr/sbin/policy-rc.d exits 101 ("action forbidden by policy",
# README.policy-rc.d of init-system-helpers). Debian maintainer scripts start, stop and restart
# services only through invoke-rc.d (invoke-rc.d(8)) or, on a systemd machine, deb-systemd-invoke
# (the debhelper postinst snippet: `deb-systemd-invoke start|restart UNIT`), and both ask policy-rc.d
# first: on 101 deb-systemd-invoke prints "returned 101, not running ..." and exits 0 without calling
# systemctl (deb-systemd-invoke(1p), "a wrapper around systemctl, respecting policy-rc.d"). So nothing
# is started, and a running service whose package apt upgrades as a dependency is not restarted. Units
# are still enabled as usual (they start at the next boot). NEEDRESTART_SUSPEND=1 keeps needrestart's
# apt hook (apt-pinvoke) from restarting daemons after the install. A policy-rc.d the machine had is
# moved aside and moved back (the same file: content, mode, owner, times); a missing one is removed
# again; a run killed in between is repaired by the next run, which always calls
# release_service_actions first. The directory lock keeps two install.sh from swapping at once.
hold_service_actions() {
    if [ -e "$POLICY_RC_D" ] || [ -L "$POLICY_RC_D" ]; then
        mv "$POLICY_RC_D" "$SAVED_POLICY"         # a rename: put back later as the very same file
    else
        : > "$NO_POLICY"
    fi
    printf '#!/bin/sh\n%s\nexit 101\n' "$OUR_POLICY_TAG" > "$POLICY_RC_D.tunelab-new"
    chmod 755 "$POLICY_RC_D.tunelab-new"
    mv -f "$POLICY_RC_D.tunelab-new" "$POLICY_RC_D"
}

# Put back the machine's own policy-rc.d (or none); also repairs what a killed earlier run left.
release_service_actions() {
    rm -f "$POLICY_RC_D.tunelab-new"
    if [ -e "$SAVED_POLICY" ] || [ -L "$SAVED_POLICY" ]; then
        mv -f "$SAVED_POLICY" "$POLICY_RC_D"
    elif [ -e "$NO_POLICY" ]; then
        if [ -f "$POLICY_RC_D" ] && grep -qxF "$OUR_POLICY_TAG" "$POLICY_RC_D"; then
            rm -f "$POLICY_RC_D"
        fi
        rm -f "$NO_POLICY"
    fi
}

apt_install_without_service_actions() {
    trap release_service_actions EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    hold_service_actions
    apt-get update -qq 9<&-
    DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null 9<&-
    release_service_actions
    trap - EXIT INT TERM HUP
}

install_debian_packages() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "install: not root (or no apt-get): skipping Debian packages; lab tests will be skipped" >&2
        return 0
    fi
    local missing=()
    for pkg in "${DEBIAN_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    exec 9<"$(dirname "$POLICY_RC_D")"
    flock 9                                       # one install.sh at a time swaps policy-rc.d
    release_service_actions
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "install: Debian packages: ${missing[*]}" >&2
        apt_install_without_service_actions "${missing[@]}"
    fi
    exec 9<&-
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
[ "${TUNELAB_SKIP_PYTHON:-}" = 1 ] || install_python_packages
