#!/usr/bin/env bash
# What the console and ops tests (tests/tests/console.rs) need, installed only when missing:
# Debian's headless Chromium (never a downloaded browser), promtool (Debian's prometheus
# package) and a font for readable screenshots; then the console's pinned npm packages
# (uPlot, esbuild, playwright-core) from host/cli/console/package-lock.json.
# Cold machine, measured: apt-get update ~4 s, install ~25 s (147 MB of packages, 746 MB on
# disk), npm ci ~2 s (26 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/promtool ] || need+=(prometheus)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "console-deps: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# npm ci again only when the lock file is newer than the last install.
cd host/cli/console
if [ ! -e node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
