#!/usr/bin/env bash
# The main job: a real bisection end to end on this machine (embedded PostgreSQL, a server,
# two local workers, a generated example repository). Extra arguments go to `perfbisect demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -q -p perfbisect-cli
# Where cargo put it: a shared CARGO_TARGET_DIR (worktrees) as well as ./target.
exec "${CARGO_TARGET_DIR:-target}/release/perfbisect" demo "$@"
