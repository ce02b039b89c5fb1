"""Twenty fits killed with SIGKILL at seeded random moments (half at a batch's or an epoch's end, half at a fraction of an
unkilled fit's time on this machine), each going on with the run the last one left (issue 17): every file opens, the run
is marked failed, temporaries go, the numbering goes on"""
import json, os, random, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import numpy as np
from fastexplorer.all import *
from fastexplorer.export import _TEMP

WORKER = Path(__file__).parent/'crash_worker.py'

def _index_lines(p:Path)->list:
    "The epochs `epochs.jsonl` lists, line by line as written (a line torn by the kill skipped)"
    res = []
    for line in (p/'epochs.jsonl').read_bytes().splitlines() if (p/'epochs.jsonl').exists() else []:
        try: res.append(json.loads(line)['epoch'])
        except ValueError: pass
    return res

def _check_files(p:Path):
    "Every file of the run opens: the JSON files parse, the databases pass SQLite's integrity check, the snapshots load"
    for f in p.glob('*.json'): json.loads(f.read_text())
    for f in p.glob('*.sqlite'):
        con = sqlite3.connect(f)
        try: assert con.execute('PRAGMA integrity_check').fetchone()[0] == 'ok', f
        finally: con.close()
    for f in p.glob('snapshot_*.npy'): np.load(f)
    for f in p.iterdir():
        assert f.name == LOCK or not f.name.startswith('.') or _TEMP.match(f.name), f"a hidden file not ours: {f.name}"

def test_twenty_kills(tmp_path):
    """20 fits (3 epochs, every batch, steps and snapshots) killed at random moments, half at an event, half at a time;
    the run goes on from its last epoch each time"""
    p,rng = tmp_path/'run',random.Random(17)
    proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, 'PYTHONPATH': os.pathsep.join([str(WORKER.parent.parent), os.environ.get('PYTHONPATH', '')])})
    def fit(epochs, kill_after=None, path=p, event=None):
        proc.stdin.write(f"{path} {epochs}{'' if event is None else f' {event}'}\n"); proc.stdin.flush()
        pid = int(proc.stdout.readline())
        if kill_after is not None:
            time.sleep(kill_after)
            try: os.kill(pid, signal.SIGKILL)
            except ProcessLookupError: pass          # it had finished
        return int(proc.stdout.readline().split()[1])
    try:
        assert fit(1, path=tmp_path/'warm') == 0      # the first fit in a process is slow (files read, caches filled)
        t = time.monotonic()
        assert fit(3, path=tmp_path/'timed') == 0     # a fit left to finish, in a run of its own: how long one takes here
        span,killed = time.monotonic() - t,0
        for i in range(20):
            before,prev = _index_lines(p),read_manifest(p)['status'] if (p/'run.json').exists() else None
            # even fits: at a time, from before the run opens to its last epoch's files (a loaded machine may let them
            # finish); odd ones: at a batch's or an epoch's end, which is always inside the fit (3 epochs hold 87)
            status = fit(3, event=rng.randrange(75)) if i % 2 else fit(3, rng.uniform(0.02, 0.9) * span)
            assert os.WIFSIGNALED(status) or not i % 2, "a fit killed at one of its events finished"
            killed += os.WIFSIGNALED(status)
            _check_files(p)
            lines = _index_lines(p)
            assert lines == list(range(1, len(lines) + 1)) and lines[:len(before)] == before   # each epoch once, in order, from the last one
            if not (p/'run.json').exists(): continue  # killed before the run started
            m = read_manifest(p)
            # a kill can land after the fit wrote its last epoch and `finished`, before its process exited; or before it opened
            # the run at all, which then still says what the fit before left (`finished`, when that one beat its kill)
            done,none = len(lines) - len(before) == 3,len(lines) == len(before)
            expected = ({'running', 'failed'} | ({'finished'} if done else set()) | ({prev} if none else set())
                        if os.WIFSIGNALED(status) else {'finished', 'failed'})
            assert m['status'] in expected, (m['status'], expected)
            if i % 2 and m['status'] == 'running':   # repaired now by a reader, or by the next fit's open
                assert repair_run(p) and read_manifest(p)['status'] == 'failed'
                assert not [f for f in p.iterdir() if _TEMP.match(f.name)]
        assert killed >= 10, f"only {killed} of the 20 fits were killed"
        n = len(_index_lines(p))
        assert fit(1) == 0                            # a last fit, left to finish
    finally:
        proc.stdin.close(); proc.wait(timeout=60)
    _check_files(p)
    run = load_run(p)
    assert run.meta['status'] == 'finished' and [e['epoch'] for e in run.meta['epochs']] == list(range(1, n + 2))
    assert not [f for f in p.iterdir() if _TEMP.match(f.name)]
    nb = 22                                           # training batches of an epoch of the digits (1,437 images, batches of 64)
    steps = run.query_steps(stats='loss')
    assert steps.step.tolist() == list(range((n + 1) * nb)) and steps.epoch.tolist() == [e for e in range(1, n + 2) for _ in range(nb)]
    assert [e['steps'] for e in run.meta['epochs']] == [e * nb for e in range(1, n + 2)]
