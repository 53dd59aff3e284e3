#!/usr/bin/env bash
# Writes a real repository's history between two revisions as bisect-sim reads it
# (`history=FILE`): one line per candidate commit, parents first, the bad commit last.
#
#   [LABEL=project] scripts/export-history.sh REPO GOOD BAD > crates/engine/histories/NAME.dag
#
# Each line is the commit's abbreviated sha and then its parents in git's order: the index
# (0-based line number among the commits) of a parent inside the range, or `-` for a parent
# on the good side (an ancestor of GOOD). Lines starting with `#` are comments.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 REPO GOOD BAD" >&2
  exit 2
fi
repo=$1 good=$2 bad=$3
git -C "$repo" rev-parse --verify --quiet "$good^{commit}" >/dev/null ||
  { echo "$0: $good is not a commit in $repo" >&2; exit 1; }
git -C "$repo" rev-parse --verify --quiet "$bad^{commit}" >/dev/null ||
  { echo "$0: $bad is not a commit in $repo" >&2; exit 1; }
count=$(git -C "$repo" rev-list --count "$good..$bad")
merges=$(git -C "$repo" rev-list --merges --count "$good..$bad")
echo "# ${LABEL:-$repo} $good..$bad: $count commits, $merges merges"
# --topo-order --reverse: every parent before its children; the tip (BAD) comes last only
# when it is the one commit without children in the range, which BAD is.
git -C "$repo" rev-list --topo-order --reverse --parents "$good..$bad" |
  awk '
    { index_of[$1] = NR - 1 }
    {
      line = substr($1, 1, 12)
      for (i = 2; i <= NF; i++) line = line " " (($i in index_of) ? index_of[$i] : "-")
      print line
    }'
