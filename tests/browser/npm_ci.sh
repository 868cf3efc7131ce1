#!/usr/bin/env bash
# npm_ci.sh DIR: installs DIR/node_modules from DIR/package-lock.json with `npm ci`
# (exact versions from the committed lockfile, no browser download). Skipped when
# node_modules was already installed from this very lockfile (stamp = its SHA-256).
set -euo pipefail
dir="$1"
command -v node >/dev/null 2>&1 || { echo "npm_ci.sh: error: node not found on PATH (install Node.js >= 20)" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "npm_ci.sh: error: npm not found on PATH (install npm)" >&2; exit 1; }
[ -f "$dir/package-lock.json" ] || { echo "npm_ci.sh: error: $dir/package-lock.json missing" >&2; exit 1; }
want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
stamp="$dir/node_modules/.earshot-lock-sha256"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "npm_ci.sh: $dir/node_modules matches package-lock.json; nothing to do"
  exit 0
fi
# Playwright must never fetch a browser: the tests use Debian's chromium.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
(cd "$dir" && npm ci --no-audit --no-fund) || {
  echo "npm_ci.sh: error: 'npm ci' failed in $dir (is the npm registry reachable?)" >&2
  exit 1
}
echo "$want" >"$stamp"
