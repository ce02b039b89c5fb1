"""The step database at scale: a synthetic run of `--steps` sampled batches × `--layers` layers, written with the real
writer (`StepWriter.append`, in flushes of 10 batches as the callback makes them).

Usage: python bench/steps.py [--steps 100000] [--layers 200] [--params 100]

Prints the store's size on disk, the time of one flush at the start and at the end of the run (median, and mean with
the write-ahead log's checkpoints, which some flushes pay for the others; a flush must cost in proportion to its rows,
never to the run's length), the time for `load_run(...).query_steps` of one layer's statistics (every step), for
`step_series` of one layer (1,000 buckets, what a chart asks for) and for `step_info` (what the page and the event
stream read first).
"""
import argparse, shutil, statistics, tempfile, time
from pathlib import Path
import numpy as np
from fastexplorer.stepdb import StepWriter, table_stats, read_steps, step_series, step_hist_series, step_info
from fastexplorer.steps import step_layout
ACT_STATS,GRAD_STATS = table_stats(step_layout(), 'act'),table_stats(step_layout(), 'grad')

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--steps', type=int, default=100_000)
    p.add_argument('--layers', type=int, default=200)
    p.add_argument('--params', type=int, default=100)
    p.add_argument('--bins', type=int, default=40)
    a = p.parse_args()
    d = Path(tempfile.mkdtemp())
    w = StepWriter(d, hist_bins=a.bins, stats=step_layout())
    layers,params = [f'{i}.conv' for i in range(a.layers)],[f'{i}.weight' for i in range(a.params)]
    rng = np.random.default_rng(0)
    act0 = np.column_stack([np.repeat(np.arange(10), a.layers), np.tile(np.arange(a.layers), 10),
                            rng.random((10 * a.layers, len(ACT_STATS))), rng.integers(0, 100, (10 * a.layers, a.bins + 2))])
    grad0 = np.column_stack([np.repeat(np.arange(10), a.params), np.tile(np.arange(a.params), 10), rng.random((10 * a.params, len(GRAD_STATS)))])
    times = []
    t0 = time.perf_counter()
    for k in range(0, a.steps, 10):
        metas = [{'step': k + i, 'fit': 0, 'epoch': 1 + (k + i) // 1000, 'split': 'train', 'iter': (k + i) % 1000, 'loss': 1.,
                  'smooth_loss': 1., 'hypers': [{'lr': 1e-3, 'mom': 0.9, 'wd': 0.01}]} for i in range(10)]
        t = time.perf_counter(); w.append(metas, layers, act0, params, grad0); times.append(time.perf_counter() - t)
        if k % 10_000 == 0: print(f"  {k:>7} steps written, {time.perf_counter() - t0:6.1f} s", flush=True)
    w.close()
    size = sum(f.stat().st_size for f in d.iterdir())
    n = len(times)
    print(f"\n{a.steps:,} steps x {a.layers} layers + {a.params} parameters: {size / 2**30:.2f} GiB on disk, written in {time.perf_counter() - t0:.0f} s")
    first,last = times[:n // 10],times[-(n // 10):]
    print(f"one flush (10 batches, {10 * (a.layers + a.params):,} rows): median {statistics.median(first) * 1e3:.1f} ms, mean {statistics.mean(first) * 1e3:.1f} ms "
          f"in the first tenth of the run; median {statistics.median(last) * 1e3:.1f} ms, mean {statistics.mean(last) * 1e3:.1f} ms in the last")
    for what,f in [('query_steps of one layer, 10 statistics, every step', lambda: read_steps(d, layers=layers[a.layers // 2], kinds='act')),
                   ('query_steps of one layer, 10 statistics, wide', lambda: read_steps(d, layers=layers[a.layers // 2], kinds='act', wide=True)),
                   ('query_steps of one layer, one statistic, every step', lambda: read_steps(d, layers=layers[a.layers // 2], stats='mean', kinds='act')),
                   ('step_series of one layer, 10 statistics, 1,000 buckets', lambda: step_series(d, layers[a.layers // 2], points=1000)),
                   ('step_series of one layer, mean, 1,000 buckets', lambda: step_series(d, layers[a.layers // 2], stats='mean', points=1000)),
                   ('step_hist_series of one layer, 400 buckets', lambda: step_hist_series(d, layers[a.layers // 2], points=400)),
                   ('step_info (epochs, fits, names, last step)', lambda: step_info(d))]:
        ts = []
        for _ in range(3): t = time.perf_counter(); r = f(); ts.append(time.perf_counter() - t)
        print(f"{what:58s} {min(ts) * 1e3:8.1f} ms   ({len(r) if hasattr(r, '__len__') else ''} rows/keys)")
    shutil.rmtree(d)

if __name__ == '__main__': main()
