"""What a seeded run leaves behind, as plain data: its epoch files, manifest, step database and `run.df`.

A refactor that should change nothing for a user is checked by running this before and after and comparing:

    OMP_NUM_THREADS=1 python scripts/fingerprint.py /tmp/before.json
    ... change the code ...
    OMP_NUM_THREADS=1 python scripts/fingerprint.py /tmp/after.json --against /tmp/before.json

Wall-clock times, durations and the package's version are left out; every other value is compared exactly.
"""
import argparse, json, math, sys, tempfile, warnings
from pathlib import Path

_VOLATILE = {'time', 'started', 'finished', 'updated', 'elapsed', 'version', 'pid', 'host', 'seconds', 'duration',
             'created', 'wall', 'python', 'torch', 'fastai', 'heartbeat', 'id', 'writer'}


def _plain(o):
    "`o` with times dropped and floats written exactly"
    if isinstance(o, dict): return {k: _plain(v) for k,v in o.items() if k not in _VOLATILE}
    if isinstance(o, (list, tuple)): return [_plain(v) for v in o]
    if isinstance(o, float): return 'nan' if math.isnan(o) else o.hex()
    return o


def _frame(df):
    "A DataFrame as plain data: its columns, then its rows"
    df = df.drop(columns=[c for c in df.columns if c in _VOLATILE], errors='ignore')
    return {'columns': [str(c) for c in df.columns], 'dtypes': [str(t) for t in df.dtypes],
            'rows': _plain(df.astype(object).where(df.notna(), None).values.tolist())}


def _runs(root:Path)->dict:
    "Train the runs whose files are compared"
    from fastai.callback.all import ShowGraphCallback  # noqa: F401 (fastai's callbacks, as a user imports them)
    from fastexplorer.all import digits_learner, ExplorerCallback
    import torch
    res = {}
    torch.manual_seed(0)
    learn = digits_learner(seed=0, cbs=ExplorerCallback(root/'plain', every=3, preflight=True))
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
    res['plain'] = root/'plain'
    torch.manual_seed(1)
    cb = ExplorerCallback(root/'every', every=1, valid=True, custom={'absmax': lambda o: o.abs().max()})
    learn = digits_learner(seed=1, cbs=cb)
    with learn.no_bar(), learn.no_logging(): learn.fit_one_cycle(2, 0.5)
    res['every'] = root/'every'
    torch.manual_seed(2)
    learn = digits_learner(seed=2, cbs=ExplorerCallback(root/'hot', every=2))
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 30.)
    res['hot'] = root/'hot'
    torch.manual_seed(3)
    learn = digits_learner(seed=3, cbs=ExplorerCallback(root/'nan', every=1))
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e8)
    res['nan'] = root/'nan'
    return res


def fingerprint(root:Path)->dict:
    "Every compared value of the runs trained in `root`"
    from fastexplorer.all import load_run
    out = {}
    for name,p in _runs(root).items():
        run = load_run(p)
        d = {f.name: _plain(json.loads(f.read_text())) for f in sorted(p.glob('*.json'))}
        d['df'] = _frame(run.df)
        d['steps'] = _frame(run.steps)
        d['alerts'] = _frame(run.alerts)
        d['recorder'] = _frame(run.recorder)
        out[name] = d
    return out


def _diff(a, b, where='', found=None):
    "Paths where `a` and `b` differ"
    found = [] if found is None else found
    if len(found) > 40: return found
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b: found.append(f"{where}/{k}: only in {'after' if k not in a else 'before'}")
            else: _diff(a[k], b[k], f"{where}/{k}", found)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i,(x,y) in enumerate(zip(a, b)): _diff(x, y, f"{where}[{i}]", found)
    elif a != b: found.append(f"{where}: {str(a)[:150]} != {str(b)[:150]}")
    return found


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out', help='where to write the fingerprint (JSON)')
    ap.add_argument('--against', help='a fingerprint to compare with')
    a = ap.parse_args()
    warnings.simplefilter('ignore')
    with tempfile.TemporaryDirectory() as d: fp = fingerprint(Path(d))
    Path(a.out).write_text(json.dumps(fp, sort_keys=True))
    print(f"{a.out}: {sum(len(v) for v in fp.values())} artefacts of {len(fp)} runs")
    if a.against:
        diffs = _diff(json.loads(Path(a.against).read_text()), fp)
        print('\n'.join(diffs) if diffs else 'the same in every compared value')
        sys.exit(1 if diffs else 0)
