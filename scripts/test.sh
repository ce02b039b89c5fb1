#!/usr/bin/env bash
# Every test of fastexplorer, from a fresh machine: install the package with its dev extras, run the notebooks
# (nbdev-test) and the pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[dev]"
nbdev-test --n-workers 2
python -m pytest -q tests "$@"
