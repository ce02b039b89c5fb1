"""Wheels for the GPU machine, so that `bench/gpu.py` runs there in one call (issue 35).

The GPU machine's image has Python 3.12 with torch, torchvision, numpy, pandas and pytest, but not fastai nor the rest of
what fastexplorer imports, and it cannot reach PyPI. This downloads those packages, at the versions installed here, as
wheels for its Python into `.whl/` (ignored by git), which the device's `run` carries there (`carry: [".whl"]`). There:

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
    PYTHONPATH=/tmp/site:$PWD python3 bench/gpu.py --out $OUT/gpu_table.md

Usage: python scripts/gpu_wheels.py [--python 3.12] [--dest .whl]
"""
import argparse, subprocess, sys
from importlib.metadata import version, PackageNotFoundError
from pathlib import Path

# what the image lacked when it was first tried (the H100 session of issue 35): fastai and its own dependencies, the
# server's, and the packages they pull in
PACKAGES = ['fastai', 'fastcore', 'fastprogress', 'fastdownload', 'fasttransform', 'plum-dispatch', 'beartype',
            'jsonschema', 'referencing', 'jsonschema-specifications', 'rpds-py', 'starlette', 'uvicorn', 'websockets',
            'python-fasthtml', 'itsdangerous', 'python-multipart', 'defusedxml', 'httpx2', 'httpcore2', 'outcome', 'trio',
            'truststore', 'oauthlib', 'sniffio', 'idna', 'anyio', 'h11', 'beautifulsoup4', 'soupsieve', 'torchinfo']
PLATFORMS = ['manylinux_2_28_x86_64', 'manylinux_2_17_x86_64', 'manylinux2014_x86_64', 'any']

def pinned(names:list)->list:
    "`name==version` of each package as installed here; `SystemExit` naming those that are not"
    res,missing = [],[]
    for n in names:
        try: res.append(f"{n}=={version(n)}")
        except PackageNotFoundError: missing.append(n)
    if missing: sys.exit(f"not installed here, so no version to pin: {', '.join(missing)} (run `pip install -e .[dev]` first)")
    return res

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--python', default='3.12', help="the GPU machine's Python version")
    p.add_argument('--dest', default='.whl', help='where the wheels go (the device run carries this folder)')
    a = p.parse_args(argv)
    cmd = [sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:', '--python-version', a.python,
           '--implementation', 'cp', *[x for pl in PLATFORMS for x in ('--platform', pl)], '-d', a.dest, *pinned(PACKAGES)]
    Path(a.dest).mkdir(exist_ok=True)
    subprocess.run(cmd, check=True)
    whls = sorted(Path(a.dest).glob('*.whl'))
    print(f"{len(whls)} wheels in {a.dest}, {sum(w.stat().st_size for w in whls) / 2**20:.1f} MiB")

if __name__ == '__main__': main()
