#!/usr/bin/env bash
# Every test of fastexplorer, from a fresh machine: install the package with its dev extras and the browser the
# page tests drive (Debian's chromium), then run the notebooks (nbdev-test), build the docs site (scripts/docs.py, which
# tests/test_docs.py checks in the browser) and run the pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[dev]"
if ! [ -x /usr/bin/chromium ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
nbdev-test --n-workers 2
python scripts/docs.py
python -m pytest -q tests "$@"
