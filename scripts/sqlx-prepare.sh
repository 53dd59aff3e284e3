#!/usr/bin/env bash
# Regenerates sqlx's offline query data (.sqlx/ at the workspace root), which lets
# `cargo build` check every `query!`/`query_as!`/`query_scalar!` without a database.
# Run it after changing a query or a migration, and commit .sqlx/ with the change.
#
# It starts a throwaway PostgreSQL cluster on a Unix socket (as root: under the postgres
# user), applies migrations/ in order, empties .sqlx/ (so files of removed queries go),
# rebuilds the server with the macros online (each writes its query's file), and stops the
# cluster. Uses CARGO_TARGET_DIR when set; pass cargo flags after `--` (e.g. `-- -j2`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ "${1:-}" = "--" ] && shift

bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -1)")
[ -x "$bin/initdb" ] || { echo "sqlx-prepare: no PostgreSQL binaries (scripts/setup.sh installs them)" >&2; exit 1; }
dir=$(mktemp -d /tmp/perfbisect-sqlx.XXXXXX)
port=$((20000 + RANDOM % 20000))
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$dir"
  as_pg=(runuser -u postgres --)
fi
stop() { "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap stop EXIT

"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -N >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-p $port -k $dir -c listen_addresses='' -c fsync=off" start >/dev/null
psql=("${as_pg[@]}" "$bin/psql" -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres)
"${psql[@]}" -d postgres -c "CREATE DATABASE perfbisect"
for m in migrations/*.sql; do
  "${psql[@]}" -d perfbisect -f "$m" >/dev/null
done

rm -rf .sqlx && mkdir .sqlx
# The macros expand again only when the crate is compiled again.
touch server/src/lib.rs
SQLX_OFFLINE=false \
  DATABASE_URL="postgres://postgres@localhost/perfbisect?host=$dir&port=$port" \
  SQLX_OFFLINE_DIR="$root/.sqlx" \
  cargo build -p perfbisect-server --all-targets "$@"
echo "sqlx-prepare: $(ls .sqlx | wc -l) queries in .sqlx/"
