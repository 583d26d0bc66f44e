#!/usr/bin/env bash
# Fills in the krew manifest template (hack/krew/graduator.yaml) from
# $DIST/checksums.txt and prints it. Used by `make release-artifacts`.
set -euo pipefail
: "${VERSION:?VERSION is required}" "${DIST:?DIST is required}"
template="$(dirname "$0")/graduator.yaml"
args=(-e "s|{{VERSION}}|${VERSION}|g")
while read -r sum file; do
	platform=${file#kubectl-graduator_"${VERSION}"_}
	platform=${platform%.tar.gz}
	args+=(-e "s|{{SHA256_${platform}}}|${sum}|g")
done < "${DIST}/checksums.txt"
out=$(sed "${args[@]}" "$template" | sed '1,4d')
if grep -q '{{' <<<"$out"; then
	echo "render.sh: placeholders left unfilled:" >&2
	grep '{{' <<<"$out" >&2
	exit 1
fi
printf '%s\n' "$out"
