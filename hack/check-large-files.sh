#!/usr/bin/env bash
# Fails when git tracks a file larger than MAX_BYTES (default 1 MiB): a built
# binary committed by mistake stays in every clone and every fork. Run from
# the root of a checkout (make test runs it).
set -euo pipefail

max=${MAX_BYTES:-1048576}
large=()
while IFS= read -r -d '' path; do
  [ -f "$path" ] || continue
  size=$(stat -c %s "$path")
  if [ "$size" -gt "$max" ]; then
    large+=("$path ($size bytes)")
  fi
done < <(git ls-files -z)

if [ ${#large[@]} -gt 0 ]; then
  echo "tracked files larger than $max bytes (build outputs belong in bin/, which is ignored):" >&2
  printf '  %s\n' "${large[@]}" >&2
  echo "remove them with: git rm --cached <file>" >&2
  exit 1
fi
