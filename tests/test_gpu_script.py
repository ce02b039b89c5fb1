"`bench/gpu.py`, the one command that runs every GPU check (issue 35), dry-run on the CPU: every section runs, and the table is whole"
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ['cuda tests', 'cold start', 'probe', 'overhead', 'syncs per step', 'landscape', 'torch.compile']

def test_gpu_script_dry_run(tmp_path):
    out = tmp_path/'table.md'
    r = subprocess.run([sys.executable, 'bench/gpu.py', '--device', 'cpu', '--quick', '--out', str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = out.read_text().splitlines()
    assert lines[0].startswith('GPU checks on CPU') and '| check | what | figure | note |' in lines
    rows = [l.split(' | ') for l in lines if l.startswith('| ') and not l.startswith('| check')]
    assert [s for s in SECTIONS if s not in {r[0][2:] for r in rows}] == [], rows
    assert not [r for r in rows if r[1] == 'failed'], rows
    assert sum(r[0] == '| overhead' for r in rows) == 4 and any('ratio' in r[3] for r in rows if r[0] == '| overhead')

def test_gpu_script_refuses_a_missing_device():
    r = subprocess.run([sys.executable, 'bench/gpu.py', '--device', 'cuda:7', '--only', 'probe'], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    import torch
    if torch.cuda.device_count() > 7: return
    assert r.returncode == 2 and '--device cuda:7' in r.stderr, r.stderr[-2000:]

def test_gpu_script_times_a_slow_contender_once(tmp_path):
    "A contender whose first fit passes `--slow` is timed by that fit alone and still gets its row (here: every one)"
    out = tmp_path/'table.md'
    r = subprocess.run([sys.executable, 'bench/gpu.py', '--device', 'cpu', '--quick', '--only', 'overhead', '--slow', '0',
                        '--out', str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = [l.split(' | ') for l in out.read_text().splitlines() if l.startswith('| overhead')]
    assert len(rows) == 4 and sum('its first fit only' in r[2] for r in rows) == 3, rows
    assert 'ratio 1.000' in rows[0][3], rows
