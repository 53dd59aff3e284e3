#!/usr/bin/env bash
# The whole test suite: unit tests, API tests against a real PostgreSQL cluster that the
# suite starts itself, and end-to-end tests with real server and worker processes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh $(grep -v "^#" scripts/test-packages)
export PERFBISECT_TEST_PG_DIR="${PERFBISECT_TEST_PG_DIR:-$PWD/target/test-pg}"
stop_pg() {
  # The suite's cluster is shared by all test processes; stop it once they are done.
  local d="$PERFBISECT_TEST_PG_DIR/pg.datadir"
  [ -f "$d" ] || return 0
  local bin; bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V | tail -n 1)")
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$bin/pg_ctl" -D "$(cat "$d")" -m fast -w stop >/dev/null 2>&1 || true
  else
    "$bin/pg_ctl" -D "$(cat "$d")" -m fast -w stop >/dev/null 2>&1 || true
  fi
}
trap stop_pg EXIT
# schemathesis (PyPI) for cli/tests/schemathesis.rs, in a venv beside the build.
venv="${CARGO_TARGET_DIR:-$PWD/target}/schemathesis-venv"
if [ ! -x "$venv/bin/schemathesis" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q schemathesis==4.32.5
fi
export PERFBISECT_SCHEMATHESIS="$venv/bin/schemathesis"
cargo build --workspace --all-targets -q
# Doc tests first, so the run closes on the main runner's summary.
cargo test --workspace --doc -q
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
