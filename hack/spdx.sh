#!/usr/bin/env bash
# Every hand-written Go file starts with the licence header (SPDX); generated files keep
# their generators' headers (they say "Code generated"). `hack/spdx.sh` lists the files
# that lack it and fails; `hack/spdx.sh --fix` adds it. `make lint` runs the check.
set -euo pipefail
cd "$(dirname "$0")/.."
header=$'// Copyright The netpulse Authors\n// SPDX-License-Identifier: Apache-2.0\n'
missing=()
while IFS= read -r f; do
  head -n 20 "$f" | grep -q 'Code generated' && continue
  head -n 5 "$f" | grep -q 'SPDX-License-Identifier' && continue
  missing+=("$f")
done < <(git ls-files '*.go' ':!:_build/**'; git ls-files --others --exclude-standard '*.go')
((${#missing[@]})) || exit 0
if [[ ${1:-} == --fix ]]; then
  for f in "${missing[@]}"; do
    { printf '%s\n' "$header"; cat "$f"; } >"$f.spdx" && mv "$f.spdx" "$f"
  done
  echo "added the licence header to ${#missing[@]} files"
  exit 0
fi
echo "Go files without the licence header (hack/spdx.sh --fix adds it):" >&2
printf '  %s\n' "${missing[@]}" >&2
exit 1
