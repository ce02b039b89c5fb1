#!/usr/bin/env bash
# Every test of fastexplorer, from a fresh machine: install the package with its dev extras and the browser the
# page tests drive (Debian's chromium), then run the notebooks (nbdev-test), build the docs site (scripts/docs.py, which
# tests/test_docs.py checks in the browser) and run the pytest suite: one pytest-xdist worker per core (8 at most),
# each on one OpenMP thread, since workers that each took every core would fight over them.
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
workers=$(python -c "import os; print(min(8, len(os.sched_getaffinity(0))))")
OMP_NUM_THREADS=1 python -m pytest -q -n "$workers" --dist worksteal tests "$@"
