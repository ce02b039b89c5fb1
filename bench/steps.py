"""The step database at scale: a synthetic run of `--steps` sampled batches × `--layers` layers and `--params`
parameters, written with the real writer (`StepWriter.append`, in flushes of 10 batches as the callback makes them).

Usage: python bench/steps.py [--steps 100000] [--layers 200] [--params 200] [--keep DIR]

The statistics move as a training run's do (`synthetic_flush`): each layer's activations are a normal distribution
whose mean and spread drift slowly from step to step, histogrammed over 3,211,264 values (a batch of 64 at 28×28 with
64 channels) into the callback's 40 bins over [-10, 10] (multinomial counts, with the two tails); each parameter's
gradient norm, largest gradient and update ratio drift the same way. Random numbers in every column (what an earlier
version of this script wrote) would measure zlib on noise, which no run produces.

The writer keeps histograms as the callback has it keep them for a fit of that many sampled batches
(`hist_every_for`: 1 in 50 at 100,000 steps), and the statistics of every batch.

Prints the store's size on disk and per series (a layer or a parameter) and step (target <= 48 bytes; 100,000 steps:
<= 2 GB), the time of one flush at the start and at the end of the run (a flush must cost in proportion to its rows,
never to the run's length), and the time of each reader on one layer: `read_steps` (what `load_run(...).query_steps`
calls; target <= 0.3 s), `step_series` of a full range and of a zoomed one (what the page's step endpoint calls;
target <= 0.3 s), `step_hist_series` and `step_info`.
"""
import argparse, shutil, statistics, tempfile, time
from pathlib import Path
import numpy as np
import torch
from fastexplorer.stepdb import StepWriter, table_stats, hist_every_for
from fastexplorer.stepread import read_steps
from fastexplorer.stepseries import step_series, step_hist_series, step_info
from fastexplorer.steps import step_layout
ACT_STATS,GRAD_STATS = table_stats(step_layout(), 'act'),table_stats(step_layout(), 'grad')
N_VALUES,BINS,RANGE = 64 * 64 * 28 * 28,40,(-10., 10.)

class Synthetic:
    "A run's statistics that drift as training moves them: `flush(k)` gives the arrays of the 10 batches from step `k`"
    def __init__(self, n_layers:int, n_params:int, seed:int=0):
        self.rng = np.random.default_rng(seed)
        self.mu,self.sd = self.rng.normal(0, 0.5, n_layers),self.rng.uniform(0.5, 2, n_layers)
        self.g = self.rng.uniform(1e-3, 1, n_params)
        self.edges = np.linspace(*RANGE, BINS + 1)

    def _walk(self, x, size:float, n:int=10):
        "`n` steps of a random walk from `x`, each by about `size` times its scale, a row each"
        return x * np.exp(np.cumsum(self.rng.normal(0, size, (n, *np.shape(x))), axis=0))

    def flush(self)->tuple:
        "The `act` and `grad` arrays of 10 sampled batches, as `StepQueue.write` hands them to the writer"
        L,P = len(self.mu),len(self.g)
        mu = self.mu + np.cumsum(self.rng.normal(0, 0.002, (10, L)), axis=0); sd = self._walk(self.sd, 0.002)
        self.mu,self.sd = mu[-1],sd[-1]
        cdf = torch.special.ndtr(torch.from_numpy((self.edges[None, None] - mu[..., None]) / sd[..., None])).numpy()
        p = np.diff(np.concatenate([np.zeros((10, L, 1)), cdf, np.ones((10, L, 1))], axis=-1), axis=-1)
        hist = self.rng.multinomial(N_VALUES, p.reshape(-1, BINS + 2)).reshape(10, L, -1)
        f32 = lambda x: np.float32(x).astype(np.float64)
        stats = np.stack([np.full((10, L), N_VALUES), np.zeros((10, L)), np.zeros((10, L)), f32(mu), f32(sd), f32(mu - 5 * sd),
                          f32(mu + 5 * sd), f32(np.abs(mu) + 0.8 * sd), f32(0.05 * sd), f32(np.clip(0.1 - mu / 10, 0, 1))], axis=-1)
        act = np.concatenate([np.stack(np.meshgrid(np.arange(10), np.arange(L), indexing='ij'), -1), stats, hist], -1).reshape(10 * L, -1)
        g = self._walk(self.g, 0.01); self.g = g[-1]
        gs = np.stack([f32(g), f32(g / 20), np.zeros((10, P)), np.zeros((10, P)), f32(1e-3 * g / g.mean())], axis=-1)
        grad = np.concatenate([np.stack(np.meshgrid(np.arange(10), np.arange(P), indexing='ij'), -1), gs], -1).reshape(10 * P, -1)
        return act,grad

def write(d:Path, steps:int, n_layers:int, n_params:int, log:bool=True)->tuple:
    "Write the synthetic run into run folder `d`; the layers' and parameters' names, the flushes' times and the total"
    w = StepWriter(d, hist_bins=BINS, hist_range=RANGE, stats=step_layout(), hist_every=hist_every_for(steps))   # as the callback
    layers,params = [f'{i}.conv' for i in range(n_layers)],[f'{i}.conv.weight' for i in range(n_params)]
    syn,times,t0 = Synthetic(n_layers, n_params),[],time.perf_counter()
    for k in range(0, steps, 10):
        metas = [{'step': k + i, 'fit': 0, 'epoch': 1 + (k + i) // 1000, 'split': 'train', 'iter': (k + i) % 1000, 'loss': 1.,
                  'smooth_loss': 1., 'hypers': [{'lr': 1e-3, 'mom': 0.9, 'wd': 0.01}]} for i in range(10)]
        act,grad = syn.flush()
        t = time.perf_counter(); w.append(metas, layers, act, params, grad); times.append(time.perf_counter() - t)
        if log and k % 10_000 == 0: print(f"  {k:>7} steps written, {time.perf_counter() - t0:6.1f} s", flush=True)
    w.close()
    return layers,params,times,time.perf_counter() - t0

def size_of(d:Path)->int: return sum(f.stat().st_size for f in d.glob('steps.sqlite*'))

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--steps', type=int, default=100_000)
    p.add_argument('--layers', type=int, default=200)
    p.add_argument('--params', type=int, default=200)
    a = p.parse_args()
    d = Path(tempfile.mkdtemp())
    layers,params,times,total = write(d, a.steps, a.layers, a.params)
    size,n = size_of(d),len(times)
    print(f"\n{a.steps:,} steps x {a.layers} layers + {a.params} parameters: {size / 2**30:.2f} GiB on disk "
          f"({size / (a.steps * (a.layers + a.params)):.1f} bytes per series and step; target <= 48), written in {total:.0f} s")
    first,last = times[:n // 10],times[-(n // 10):]
    print(f"one flush (10 batches, {10 * (a.layers + a.params):,} rows): median {statistics.median(first) * 1e3:.1f} ms, mean {statistics.mean(first) * 1e3:.1f} ms "
          f"in the first tenth of the run; median {statistics.median(last) * 1e3:.1f} ms, mean {statistics.mean(last) * 1e3:.1f} ms in the last")
    l,zoom = layers[a.layers // 2],(a.steps // 2, a.steps // 2 + a.steps // 100)
    for what,f in [('read_steps of one layer, 10 statistics, every step', lambda: read_steps(d, layers=l, kinds='act')),
                   ('read_steps of one layer, 10 statistics, wide', lambda: read_steps(d, layers=l, kinds='act', wide=True)),
                   ('read_steps of one layer, one statistic, every step', lambda: read_steps(d, layers=l, stats='mean', kinds='act')),
                   ('step_series of one layer, 4 statistics, 1,000 buckets', lambda: step_series(d, l, stats=['mean', 'std', 'near_zero', 'silent_frac'])),
                   ('step_series of one layer, zoomed to 1% of the run', lambda: step_series(d, l, stats=['mean', 'std'], start=zoom[0], stop=zoom[1])),
                   ('step_series of one parameter, gradient norm', lambda: step_series(d, params[0], 'grad', stats='norm')),
                   ('step_hist_series of one layer, 400 buckets', lambda: step_hist_series(d, l, points=400)),
                   ('step_info (epochs, fits, names, last step)', lambda: step_info(d))]:
        ts = []
        for _ in range(3): t = time.perf_counter(); r = f(); ts.append(time.perf_counter() - t)
        print(f"{what:58s} {min(ts) * 1e3:8.1f} ms   ({len(r) if hasattr(r, '__len__') else ''} rows/keys)")
    shutil.rmtree(d)

if __name__ == '__main__': main()
