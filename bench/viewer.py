"""How fast the light viewer starts (issue 33): `fastexplorer --help` (wall time and peak memory of the process), and
`fastexplorer serve` from its start to the first answer of `/api/runs` on a real run, beside `import torch` for scale.

    python bench/viewer.py [--repeat 3]

Each figure is the median of `--repeat` fresh processes, measured side by side in one run."""
import argparse, os, resource, shutil, socket, statistics, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

CLI = shutil.which('fastexplorer') or sys.exit("the `fastexplorer` console script is not installed: pip install -e '.[dev]'")

def timed(args:list)->tuple:
    "Wall seconds and peak resident MB of one run of `args` (a fresh process, waited for)"
    t = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _,status,ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_maxrss / 1024

def first_answer(run:Path)->float:
    "Seconds from starting `fastexplorer serve run` to its first answer of `/api/runs`"
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    t = time.perf_counter()
    p = subprocess.Popen([CLI, 'serve', str(run), '--port', str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - t < 60:
            try:
                urllib.request.urlopen(f'http://127.0.0.1:{port}/api/runs', timeout=5).read()
                return time.perf_counter() - t
            except OSError: time.sleep(0.02)
        raise TimeoutError('the server did not answer in 60 s')
    finally: p.terminate(); p.wait()

if __name__ == '__main__':
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0]); a.add_argument('--repeat', type=int, default=3)
    n = a.parse_args().repeat
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([CLI, 'demo', '--path', f'{d}/run', '--epochs', '1', '--no-serve'], check=True, capture_output=True)
        helps = [timed([CLI, '--help']) for _ in range(n)]
        torch = [timed([sys.executable, '-c', 'import torch']) for _ in range(n)]
        serve = [first_answer(Path(d)/'run') for _ in range(n)]
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    print(f"fastexplorer --help:          {med(helps, 0):.2f} s, {med(helps, 1):.0f} MB peak   (target: under 1 s and 150 MB)")
    print(f"python -c 'import torch':     {med(torch, 0):.2f} s, {med(torch, 1):.0f} MB peak   (for scale)")
    print(f"serve, start to first answer: {statistics.median(serve):.2f} s   (target: within 2 s)")
