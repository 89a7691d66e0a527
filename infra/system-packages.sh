#!/usr/bin/env bash
# Install the Debian packages delayline's commands need and the machine lacks:
# Java 17 and Maven (broker and jar cache), python3-venv, Chromium (browser tests),
# Node.js and npm (lint and unit tests of the admin page's JavaScript), redis-server
# (the Redis hold's tests and `delayline redis`), Prometheus and promtool (the alert
# rules' tests in `make lint`, the Prometheus e2e test).
# Idempotent: does nothing when everything is present.
set -euo pipefail

missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
[ -x "${DELAYLINE_CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v promtool >/dev/null || missing+=(prometheus)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing system packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO="sudo"
  else
    echo "error: need root or sudo to install: ${missing[*]}" >&2
    echo "       install them with apt-get, then run this again" >&2
    exit 1
  fi
fi
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
