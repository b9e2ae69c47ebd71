#!/usr/bin/env bash
# Renders a sysray flame graph SVG in headless Chromium and writes a PNG, to
# check by eye (or in CI) that the graph opens and draws without anything
# from outside the file.
#
#   bash scripts/svg-screenshot.sh graph.svg shot.png
#
# Installs Debian's chromium when it is missing. Chromium runs with the
# network features that would reach out disabled: the SVG must need nothing.
set -euo pipefail
svg=$(realpath "$1")
png=$(realpath -m "${2:-${1%.svg}.png}")
if ! command -v chromium >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
width=$(grep -oE 'width="[0-9]+"' "$svg" | head -1 | grep -oE '[0-9]+')
height=$(grep -oE 'height="[0-9]+"' "$svg" | head -1 | grep -oE '[0-9]+')
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$profile" --window-size="${width:-1200},${height:-600}" \
	--screenshot="$png" "file://$svg" >/dev/null 2>&1
test -s "$png"
echo "$png"
