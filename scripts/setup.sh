#!/usr/bin/env bash
# Installs what perfbisect needs on a Debian machine with only the Rust toolchain:
# PostgreSQL (server binaries; no service is started), git, a C compiler.
# Sourced by scripts/demo.sh and scripts/test.sh. Stops with a message naming what is missing.
set -euo pipefail

need_pkgs=()
pg_ok() {
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1
}
pg_ok || need_pkgs+=(postgresql)
command -v git >/dev/null 2>&1 || need_pkgs+=(git)
command -v cc >/dev/null 2>&1 || need_pkgs+=(gcc)
command -v runuser >/dev/null 2>&1 || need_pkgs+=(util-linux)
for extra in "$@"; do
  case "$extra" in
    chromium) command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium) ;;
    # Debian's package is chromium-driver; its command is chromedriver.
    chromedriver|chromium-driver) command -v chromedriver >/dev/null 2>&1 || need_pkgs+=(chromium-driver) ;;
    *) dpkg -s "$extra" >/dev/null 2>&1 || need_pkgs+=("$extra") ;;
  esac
done

if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_pkgs[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  else
    echo "setup: missing packages: ${need_pkgs[*]}" >&2
    echo "setup: install them with: sudo apt-get install -y ${need_pkgs[*]}" >&2
    exit 1
  fi
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is not on PATH: install the Rust toolchain (rustup) first" >&2
  exit 1
fi
