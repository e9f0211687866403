#!/usr/bin/env bash
# The mass edits of issue 26 item 6, as one reproducible step over the whole tree (run on the
# merged main, then commit the result): idempotent, a second run changes nothing.
#
#   1. tests mirror src/ in folders: every `old new` line of tools/test_layout.txt is a `git mv`,
#      and every mention of the old path in the tree's text files (tools/mutation_check.py's node
#      ids, docs, docstrings) is rewritten to the new one. Tests find the checkout through
#      tests/_paths.py (ROOT, DATA), never through their own folder's depth.
#   2. `ruff check --fix` (the rules of [tool.ruff.lint] in pyproject.toml; safe fixes only).
#   3. `ruff format` (line length 100) over src, tests, tools, benchmarks.
#   4. `ruff check` again: what the formatter moved is checked too; anything left fails the script.
#
# Usage: tools/apply_habits.sh            (PY=/path/to/python to pick the interpreter with ruff)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-python}"
start=$(date +%s)

# ---------------------------------------------------------------- 1. the tests' folders
moved=0
while read -r old new; do
  case "$old" in ''|\#*) continue ;; esac
  if [ -e "$old" ]; then
    mkdir -p "$(dirname "$new")"
    if git ls-files --error-unmatch "$old" >/dev/null 2>&1; then git mv "$old" "$new"; else mv "$old" "$new"; fi
    moved=$((moved + 1))
  fi
  [ -e "$new" ] || { echo "error: $old is not in the tree and neither is $new (tools/test_layout.txt)"; exit 2; }
  # mentions of the old path, in tracked text files (and the new file itself, untracked or not)
  esc=$(printf '%s' "$old" | sed 's/[.]/\\./g')
  { git grep -lI -e "$old" -- . ':!tools/test_layout.txt' 2>/dev/null || true; } | while read -r f; do
    sed -i "s#\\b${esc}\\b#${new}#g" "$f"
  done
done < tools/test_layout.txt
echo "tests moved: $moved"

# ---------------------------------------------------------------- 2-4. lint and format
$PY -m ruff check --fix --quiet src tests tools benchmarks || true   # what is left is reported in 4
$PY -m ruff format --quiet src tests tools benchmarks
$PY -m ruff check src tests tools benchmarks
$PY -m ruff format --check --quiet src tests tools benchmarks
echo "apply_habits: done in $(( $(date +%s) - start ))s"
