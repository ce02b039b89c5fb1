"""How well fastexplorer names the cause of real training bugs (issue 32): every case of the bug zoo (`tests/bugzoo.py`),
its buggy program and its fixed twin, and the healthy runs, trained under `ExplorerCallback(preflight=True)`.

Prints a table (case, bug, truth, first alert, right?) and three figures: detection recall (an alert names the cause),
first-alert culprit accuracy, and false alarms (a fixed twin or healthy run raising a warning or an error).
`python bench/diagnosis.py [case ...]`; `--seed N` changes the seed of every run."""
import argparse, sys, tempfile, time, warnings
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent.parent/'tests'))
from bugzoo import cases, run_case, judge

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('cases', nargs='*', help='case names (default: all)')
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    warnings.filterwarnings('ignore')
    cs = cases()
    names = a.cases or list(cs)
    rows,alarms,t0 = [],[],time.time()
    print(f"{'case':28} {'bug':60} {'truth':34} {'first alert':28} right?  fixed twin")
    for n in names:
        c = cs[n]
        with tempfile.TemporaryDirectory() as d:
            j = None
            if not c.healthy: j = judge(c, run_case(c, False, Path(d)/'bug', a.seed)[0])
            fixed,_ = run_case(c, True, Path(d)/'fixed', a.seed)
        false = [f"{k} {l!r}".strip() for k,l in zip(fixed.kind, fixed.layer)]
        alarms.append((n, c.healthy, false))
        truth = ','.join(sorted(c.kinds)) + (f" @{c.layer}" if c.layer else '')
        right = '-' if j is None else 'first' if j['first'] else 'later' if j['detected'] else 'MISSED'
        print(f"{n:28} {(c.bug or '(healthy)')[:60]:60} {truth[:34]:34} {(j or {}).get('first_alert', '-')[:28]:28} {right:7} "
              f"{'quiet' if not false else 'ALARM: ' + ', '.join(false)}", flush=True)
        if j is not None: rows.append(j)
    if rows:
        print(f"\ndetection recall: {sum(r['detected'] for r in rows)}/{len(rows)} = {sum(r['detected'] for r in rows) / len(rows):.0%}")
        print(f"first-alert culprit accuracy: {sum(r['first'] for r in rows)}/{len(rows)} = {sum(r['first'] for r in rows) / len(rows):.0%}")
    twins,healthy = [x for x in alarms if not x[1]],[x for x in alarms if x[1]]
    print(f"false alarms: {sum(bool(x[2]) for x in twins)} of {len(twins)} fixed twins, {sum(bool(x[2]) for x in healthy)} of {len(healthy)} healthy runs")
    print(f"({time.time() - t0:.0f} s)")

if __name__ == '__main__': main()
