#!/usr/bin/env bash
# Prints the path of a prebuilt Debian kernel image for the qemu tests, fetching it once
# (the current dependency of linux-image-amd64, with apt-get download + dpkg -x) into the
# directory given as $1 (default target/test-kernel). Safe to call from parallel tests.
set -euo pipefail
dir="${1:-target/test-kernel}"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
exec 9>"$dir/lock"
flock 9
# The lab VMs (worker/tests/lab.rs) also need the e1000 NIC driver from the same package.
if [ ! -s "$dir/vmlinuz" ] || [ ! -s "$dir/e1000.ko" ]; then
  find_pkg() {
    apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'
  }
  pkg=$(find_pkg)
  if [ -z "$pkg" ]; then
    apt-get update -qq >/dev/null 2>&1 || true
    pkg=$(find_pkg)
  fi
  [ -n "$pkg" ] || { echo "test-kernel: apt-cache knows no linux-image-amd64" >&2; exit 1; }
  tmp=$(mktemp -d "$dir/fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download -qq "$pkg" >/dev/null 2>&1) \
    || { echo "test-kernel: apt-get download $pkg failed" >&2; exit 1; }
  dpkg -x "$tmp"/*.deb "$tmp/x"
  cp "$tmp"/x/lib/modules/*/kernel/drivers/net/ethernet/intel/e1000/e1000.ko "$dir/e1000.ko.tmp"
  mv "$dir/e1000.ko.tmp" "$dir/e1000.ko"
  cp "$tmp"/x/boot/vmlinuz-* "$dir/vmlinuz.tmp"
  mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
fi
echo "$dir/vmlinuz"
