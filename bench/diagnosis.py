"""How well fastexplorer names the cause of real training bugs (issues 32, 45): every case of the bug zoo (`tests/bugzoo.py`),
its buggy program and its fixed twin, and the healthy runs, trained under `ExplorerCallback(preflight=True)`.

Prints a table (case, half, bug, truth, first alert, right?, the fixed twin's or healthy run's last/first loss and what
it raised), then for each half (`dev`, `held-out`, `healthy`) found (an alert names the cause), named first (the first
alert does) and false alarms (a fixed twin or healthy run raising a warning or an error), beside the targets. An alert
whose hint names causes of three kinds or more counts as naming none (`bugzoo.cause_kinds`). A fixed twin counts only if
it trains (last losses at most 0.9× its first, `bugzoo.trains`); one that does not is flagged, not counted.
`python bench/diagnosis.py [case ...] [--half dev|held-out|healthy] [--seed N]`"""
import argparse, math, sys, tempfile, time, warnings
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent.parent/'tests'))
from bugzoo import cases, run_case, judge, loss_ratio, trains

HALVES = ('dev', 'held-out', 'healthy')
TARGETS = {'found': 0.9, 'first': 0.8, 'alarms': 1 / 16}   # the held-out half's (issue 45); the healthy set: no false alarm

def _pct(k, n): return f"{k}/{n} = {k / n:.0%}" if n else '0/0'

def summary(half:str, rows:list)->list:
    "The lines of `half`'s figures from its `rows` (`dict(j=judgement or None, alarms=[…], trains=bool)`)"
    twins = [r for r in rows if r['trains']]
    alarms = sum(bool(r['alarms']) for r in twins)
    idle = [r['name'] for r in rows if not r['trains']]
    learn = f"; not training (not counted): {', '.join(idle)}" if idle else ''
    if half == 'healthy':
        return [f"healthy   ({len(rows)} runs): false alarms {_pct(alarms, len(twins))} (target: none){learn}"]
    js = [r['j'] for r in rows]
    found,first = sum(j['detected'] for j in js),sum(j['first'] for j in js)
    tgt = half == 'held-out'
    def mark(ok): return (' ok' if ok else ' MISSED TARGET') if tgt else ''
    return [f"{half:9} ({len(rows)} bugs): found {_pct(found, len(js))}"
            + (f" (target ≥ {TARGETS['found']:.0%}{mark(found >= TARGETS['found'] * len(js))})" if tgt else ''),
            f"{'':9} named first {_pct(first, len(js))}"
            + (f" (target ≥ {TARGETS['first']:.0%}{mark(first >= TARGETS['first'] * len(js))})" if tgt else ''),
            f"{'':9} fixed twins alerting {_pct(alarms, len(twins))}"
            + (f" (target ≤ 1 in 16{mark(alarms <= TARGETS['alarms'] * len(twins))})" if tgt else '') + learn]

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('cases', nargs='*', help='case names (default: all)')
    ap.add_argument('--half', choices=HALVES, help='only the cases of this half')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    warnings.filterwarnings('ignore')
    cs = cases()
    names = [n for n in (a.cases or list(cs)) if a.half is None or cs[n].half == a.half]
    rows,t0 = {h: [] for h in HALVES},time.time()
    print(f"{'case':30} {'half':8} {'bug':48} {'truth':30} {'first alert':28} {'right?':6} {'last/first':>10}  fixed twin")
    for n in names:
        c,t = cs[n],time.time()
        with tempfile.TemporaryDirectory() as d:
            j = None
            if not c.healthy: j = judge(c, run_case(c, False, Path(d)/'bug', a.seed)[0])
            fixed,run = run_case(c, True, Path(d)/'fixed', a.seed)
        false = [f"{k} {l!r}".strip() for k,l in zip(fixed.kind, fixed.layer)]
        r = dict(name=n, j=j, alarms=false, trains=trains(run.losses))
        rows[c.half].append(r)
        truth = ','.join(sorted(c.kinds)) + (f" @{c.layer}" if c.layer else '')
        right = '-' if j is None else 'first' if j['first'] else 'later' if j['detected'] else 'MISSED'
        ratio = loss_ratio(run.losses)
        learnt = f"{ratio:.2f}" + ('' if r['trains'] else ' NO') if math.isfinite(ratio) else 'NaN NO'
        print(f"{n:30} {c.half:8} {(c.bug or '(healthy)')[:48]:48} {truth[:30]:30} {(j or {}).get('first_alert', '-')[:28]:28} "
              f"{right:6} {learnt:>10}  {'quiet' if not false else 'ALARM: ' + ', '.join(false)}  ({time.time() - t:.0f} s)", flush=True)
    print()
    for h in HALVES:
        if rows[h]: print('\n'.join(summary(h, rows[h])))
    print(f"({time.time() - t0:.0f} s)")

if __name__ == '__main__': main()
