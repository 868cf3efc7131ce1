#!/usr/bin/env bash
# systemd-analyze verify on deploy/systemd/earshot@.service, instantiated for a port,
# with ExecStart pointed at this build's binary (verify checks that it exists).
# Any diagnostic fails the test.
set -euo pipefail
unit="$1"; binary="$2"
command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing: apt-get install systemd"; exit 1; }
dir="$(mktemp -d)"; trap 'rm -rf "$dir"' EXIT
sed "s#/usr/local/bin/earshot#$binary#" "$unit" > "$dir/earshot@.service"
grep -q "ExecStart=$binary serve" "$dir/earshot@.service" || { echo "ExecStart not found in $unit"; exit 1; }
out="$(cd "$dir" && systemd-analyze verify "./earshot@8001.service" 2>&1)" || { echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "$out"; exit 1; fi
# The stop timeout must outlast the drain the unit asks for, or systemd kills live streams.
drain="$(grep -o -- '--drain-seconds [0-9]*' "$unit" | awk '{print $2}')"
stop="$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$unit")"
[ -n "$drain" ] && [ -n "$stop" ] && [ "$stop" -gt "$((drain + 30))" ] \
  || { echo "TimeoutStopSec=$stop must exceed --drain-seconds $drain + the 30 s shutdown grace"; exit 1; }
echo "systemd-analyze verify: clean (TimeoutStopSec=$stop > drain $drain + grace 30)"
