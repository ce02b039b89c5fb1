"""Every GPU check and benchmark of fastexplorer in one command, printing one table (issue 35).

Usage: python bench/gpu.py [--device cuda] [--quick] [--out FILE] [--skip-tests] [--only SECTIONS] [--slow S]

On the first CUDA device, in well under eight minutes:
- the `cuda`-marked tests (`pytest -m cuda`), as passed / failed / skipped;
- the cold start: the first and the second training step of the bare model in plain PyTorch;
- training overhead (`bench/overhead.py`'s contenders) on resnet50 at 224 px, batch 128, channels-last, bfloat16
  autocast: plain fit; `ExplorerCallback()` defaults; every batch (`every=1, valid=True`); fastai's
  `ActivationStats(with_hist=True)`. Median seconds per epoch over interleaved rounds, the ratio to plain, and the peak
  GPU memory each adds to plain fit's. A contender whose first fit takes over `--slow` seconds is timed by that fit
  alone (fastai's `ActivationStats(with_hist=True)` took 186 s for one epoch of 10 batches on an H200);
- synchronisations with the device per training step, counted by `torch.cuda.set_sync_debug_mode`, on steps the
  explorer samples and on those it does not;
- the probe (`bench/probe.py`'s): `learn.to_representation()` against one `no_grad` forward, on resnet50 and a ViT;
- the loss landscape: seconds per grid point against one plain evaluation of the same batch;
- `torch.compile` with the callback: compiled plain fit against compiled fit with `ExplorerCallback()` defaults.
`--device cpu --quick` runs every section on tiny models (resnet18 at 32 px, a two-layer ViT) on any machine: a dry run
that `tests/test_gpu_script.py` makes, so that the script cannot rot while no GPU is at hand.
"""
import argparse, contextlib, faulthandler, re, statistics, subprocess, sys, tempfile, time, warnings
from pathlib import Path
import torch, torchvision
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.callback.core import Callback
from fastai.callback.hook import ActivationStats
from fastai.callback.fp16 import *  # noqa: F401,F403  (Learner.to_bf16)
from fastai.callback.progress import *  # noqa: F401,F403  (Learner.no_bar)
from fastexplorer.all import ExplorerCallback

warnings.filterwarnings('ignore')
ROOT = Path(__file__).resolve().parent.parent
ROWS, T0, HEAD, OUT = [], time.monotonic(), [], None

def table()->str:
    return '\n'.join(HEAD + ['| check | what | figure | note |', '|---|---|---|---|'] + [f"| {' | '.join(r)} |" for r in ROWS]) + '\n'

def row(section:str, what:str, figure:str, note:str=''):
    "One line of the table, printed and written as soon as it is measured: a run cut short still shows what it measured"
    ROWS.append((section, what, figure, note))
    print(f"[{time.monotonic() - T0:6.1f} s] {section} | {what} | {figure} | {note}", flush=True)
    if OUT is not None: Path(OUT).write_text(table())

class Batches(DataLoader):
    "The same batch `n` times, already on the device: the data pipeline costs nothing, the model and the callbacks all"
    def __init__(self, x, y, n, **kw): self.x,self.y = x,y; super().__init__(list(range(n * len(x))), bs=len(x), num_workers=0, **kw)
    def create_item(self, s): return s
    def create_batch(self, b): return (self.x, self.y)

def batch_and_model(a, arch:str)->tuple:
    "A synthetic batch `(x, y)` and torchvision's `arch` (random weights, 10 classes), on the device and channels-last"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(a.bs, 3, a.size, a.size, generator=g).to(a.device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.bs,), generator=g).to(a.device)
    torch.manual_seed(0)
    return x,y,getattr(torchvision.models, arch)(num_classes=10).to(a.device).to(memory_format=torch.channels_last)

def make_learner(a, arch:str, cbs=None, n:int|None=None)->Learner:
    "A `Learner` of torchvision's `arch` (random weights) on a synthetic batch on the device: channels-last, bf16 on CUDA"
    x,y,m = batch_and_model(a, arch)
    dls = DataLoaders(Batches(x, y, n or a.batches, device=a.device), Batches(x, y, 2, device=a.device), device=a.device)
    learn = Learner(dls, m, loss_func=nn.CrossEntropyLoss(), cbs=cbs)
    return learn.to_bf16() if a.cuda else learn

def sync(a):
    if a.cuda: torch.cuda.synchronize()

def fit(learn, epochs:int=1):
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs, 1e-3)

def cuda_tests(a):
    """The `cuda`-marked tests, in a process of their own. Only the files that mark tests `cuda` are collected: another
    file may refuse to import where the package is on `PYTHONPATH` but not installed (no console script), as on a GPU
    machine without internet, and one such file aborted the whole session there (H200, 2026-12-01)"""
    files = sorted(str(f.relative_to(ROOT)) for f in (ROOT/'tests').glob('test_*.py') if 'mark.cuda' in f.read_text())
    cmd = [sys.executable, '-m', 'pytest', '-q', '-m', 'cuda', '-p', 'no:cacheprovider', '--continue-on-collection-errors',
           *files]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    last = (r.stdout.strip().splitlines() or ['(no output)'])[-1]
    counts = dict((k, int(v)) for v,k in re.findall(r'(\d+) (passed|failed|skipped|error|errors|deselected)', last))
    errors = counts.get('error', 0) + counts.get('errors', 0)
    row('cuda tests', 'pytest -m cuda', f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
        f"{counts.get('skipped', 0)} skipped", f"{errors} test files could not be collected (a package missing?)" if errors else '')
    if counts.get('failed') or errors: print(r.stdout[-4000:], flush=True)

def cold(a):
    """Two training steps of the bare model in plain PyTorch: the first pays once for what the shapes need (cuDNN's
    plans, which recent cuDNN compiles at run time), the second does not. The overhead section's first fits pay it"""
    x,y,m = batch_and_model(a, a.arch)
    opt,ts = torch.optim.SGD(m.parameters(), lr=1e-3),[]
    for _ in range(2):
        sync(a); t = time.perf_counter()
        with torch.autocast('cuda', dtype=torch.bfloat16) if a.cuda else contextlib.nullcontext():
            loss = nn.functional.cross_entropy(m(x), y)
        loss.backward(); opt.step(); opt.zero_grad(); sync(a); ts.append(time.perf_counter() - t)
    row('cold start', f"{a.arch} training step, plain PyTorch", f"{ts[0]:.2f} s first, {ts[1] * 1e3:.0f} ms next",
        "the first pays once for the shapes (cuDNN's plans)")

def overhead(a, tmp):
    "Seconds per epoch of each contender, interleaved rounds; the peak GPU memory each adds to plain fit's"
    configs = {'plain fit': lambda: None,
               'explorer defaults': lambda: ExplorerCallback(f'{tmp}/defaults', overwrite=True),
               'explorer every batch': lambda: ExplorerCallback(f'{tmp}/every', every=1, valid=True, overwrite=True),
               'fastai ActivationStats(with_hist=True)': lambda: ActivationStats(with_hist=True)}
    learners = {k: make_learner(a, a.arch, f()) for k,f in configs.items()}
    times,peak,cold = {k: [] for k in learners},{},{}
    for k,l in learners.items():                # warm up: cuDNN's algorithms, the explorer's probe and preflight
        t = time.perf_counter(); fit(l); sync(a); cold[k] = time.perf_counter() - t
        print(f"[{time.monotonic() - T0:6.1f} s] overhead: {k} warmed up in {cold[k]:.1f} s", flush=True)
    slow = {k for k,c in cold.items() if k != 'plain fit' and c > a.slow}
    for _ in range(a.rounds):
        for k,l in learners.items():
            if k in slow: continue
            sync(a)
            if a.cuda: torch.cuda.reset_peak_memory_stats()
            t = time.perf_counter(); fit(l); sync(a); times[k].append(time.perf_counter() - t)
            if a.cuda: peak[k] = torch.cuda.max_memory_allocated()
    base = statistics.median(times['plain fit'])
    for k,v in times.items():
        if k in slow:
            row('overhead', k, f"{cold[k]:.1f} s/epoch, its first fit only",
                f"ratio {cold[k] / base:.1f} to plain's warmed epoch; left out of the rounds (a fit over {a.slow:g} s)")
            continue
        mem = f", +{(peak[k] - peak['plain fit']) / 2**20:.0f} MiB peak" if a.cuda and k != 'plain fit' else ''
        row('overhead', k, f"{statistics.median(v):.3f} s/epoch",
            f"ratio {statistics.median(v) / base:.3f}{mem}; first fit {cold[k]:.1f} s")

class SyncStart(Callback):
    "Notes the synchronisations warned of so far, before any other callback's `before_batch`"
    order = -1000
    def __init__(self, caught:list): self.caught,self.rows = caught,[]
    def before_batch(self): self.n0 = len(self.caught)

class SyncEnd(Callback):
    "After every other callback's `after_batch`: the training batch's synchronisations, `(iter, count)`"
    order = 1000
    def __init__(self, start:SyncStart): self.start = start
    def after_batch(self):
        if self.training: self.start.rows.append((self.iter, len(self.start.caught) - self.start.n0))

def syncs(a, learners:dict):
    """Synchronisations per training step, as `torch.cuda.set_sync_debug_mode('warn')` warns of them: plain fit's, then
    the explorer's over them, in a fit of 30 batches: the first sampled step apart from the two after it"""
    if not a.cuda: row('syncs per step', 'explorer defaults', 'n/a', 'counted on CUDA only'); return
    res = {}
    for k in ('plain fit', 'explorer defaults'):
        l = learners[k]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            start = SyncStart(caught); end = SyncEnd(start); l.add_cbs([start, end])
            torch.cuda.set_sync_debug_mode('warn')
            try: fit(l)
            finally: torch.cuda.set_sync_debug_mode(0); l.remove_cbs([start, end])
        res[k] = start.rows
    plain = dict(res['plain fit'])
    extra = [(i, n - plain.get(i, 0)) for i,n in res['explorer defaults']]
    samp,rest = [n for i,n in extra if i % 10 == 0],[n for i,n in extra if i % 10]
    row('syncs per step', 'plain fit (fastai itself)', f"{statistics.median([n for _,n in res['plain fit']]):.0f}", 'median')
    row('syncs per step', 'explorer defaults, step not sampled', f"{max(rest) if rest else 0}", 'most, over plain fit')
    row('syncs per step', 'explorer defaults, first sampled step', f"{samp[0] if samp else 0}",
        'over plain fit: it also makes the tensors kept on the device (`core.device_tensor`), once')
    row('syncs per step', 'explorer defaults, later sampled steps', f"{max(samp[1:]) if samp[1:] else 'n/a'}",
        f"most, over plain fit ({len(samp) - 1} steps)")

def probe(a):
    "`learn.to_representation()` against one no_grad forward of the same batch"
    vit = (lambda: torchvision.models.vit_b_16()) if not a.quick else \
          (lambda: torchvision.models.VisionTransformer(32, 8, 2, 2, 32, 64))
    for name,mk,size in (('resnet50' if not a.quick else 'resnet18', lambda: getattr(torchvision.models, a.arch)(), a.size),
                         ('vit_b_16' if not a.quick else 'tiny ViT', vit, 224 if not a.quick else 32)):
        torch.manual_seed(0)
        model = mk().to(a.device).eval()
        x = torch.randn(1, 3, size, size, device=a.device); y = torch.zeros(1, dtype=torch.long, device=a.device)
        ds = [(x[0], y[0])]
        learn = Learner(DataLoaders(*(DataLoader(ds, bs=1, num_workers=0, device=a.device) for _ in range(2))), model,
                        loss_func=nn.CrossEntropyLoss())
        def forward():
            with torch.no_grad(): model(x)
        tf,tp = [],[]
        forward(); learn.to_representation((x, y))
        for _ in range(a.rounds * 2):
            sync(a); t = time.perf_counter(); forward(); sync(a); tf.append(time.perf_counter() - t)
            t = time.perf_counter(); learn.to_representation((x, y)); sync(a); tp.append(time.perf_counter() - t)
        f,p = statistics.median(tf),statistics.median(tp)
        row('probe', f"{name}, batch 1 at {size} px", f"{p * 1e3:.1f} ms", f"ratio {p / f:.2f} to a forward of {f * 1e3:.1f} ms")

def landscape(a, learn):
    "Seconds per loss-landscape grid point against one plain evaluation of the same batch"
    n = 3 if a.quick else 5
    xb,yb = learn.dls.valid.one_batch()
    model = learn.model
    def plain():
        model.eval()
        with torch.no_grad(), torch.autocast('cuda', dtype=torch.bfloat16) if a.cuda else contextlib.nullcontext():
            for _ in range(n * n): float(learn.loss_func(model(xb), yb))
    def grid(): learn.loss_landscape(n=n, n_batches=1, seed=0, progress=False)
    plain(); grid()
    tp,tg = [],[]
    for _ in range(a.rounds):
        t = time.perf_counter(); plain(); sync(a); tp.append((time.perf_counter() - t) / n**2)
        t = time.perf_counter(); grid(); sync(a); tg.append((time.perf_counter() - t) / n**2)
    p,g = statistics.median(tp),statistics.median(tg)
    row('landscape', f"{n}×{n} grid, 1 batch", f"{g * 1e3:.1f} ms/point", f"ratio {g / p:.2f} to a plain evaluation")

def compiled(a, tmp):
    "A compiled model's fit, plain and with `ExplorerCallback()` defaults (compilation itself left out, in the warm-up)"
    backend = 'inductor' if a.cuda else 'eager'
    ls = {}
    for k,cbs in (('compiled plain fit', None), ('compiled, explorer defaults', ExplorerCallback(f'{tmp}/compiled', overwrite=True))):
        torch._dynamo.reset()
        l = make_learner(a, a.arch, cbs)
        l.model = torch.compile(l.model, backend=backend)
        t = time.perf_counter(); fit(l); sync(a)
        ls[k] = (l, time.perf_counter() - t)
    times = {k: [] for k in ls}
    for _ in range(a.rounds):
        for k,(l,_) in ls.items():
            sync(a); t = time.perf_counter(); fit(l); sync(a); times[k].append(time.perf_counter() - t)
    base = statistics.median(times['compiled plain fit'])
    for k,v in times.items():
        row('torch.compile', f"{k} ({backend})", f"{statistics.median(v):.3f} s/epoch",
            f"ratio {statistics.median(v) / base:.3f}; first epoch (compiling) {ls[k][1]:.1f} s")

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--device', default='cuda')
    p.add_argument('--quick', action='store_true', help='tiny models, few batches: a dry run on any device')
    p.add_argument('--out', default=None, help='also write the table (markdown) to this file')
    p.add_argument('--skip-tests', action='store_true', help='leave out the cuda-marked tests')
    p.add_argument('--only', default=None,
                   help='these sections only: tests,cold,probe,overhead,syncs,landscape,compile')
    p.add_argument('--slow', type=float, default=30,
                   help="an overhead contender whose first fit takes longer is timed by that fit alone, not in rounds")
    p.add_argument('--stall', type=float, default=150, help="print every thread's stack if a section runs this many seconds")
    a = p.parse_args(argv)
    a.cuda = a.device.startswith('cuda')
    if a.cuda:
        i = torch.device(a.device).index or 0
        if not torch.cuda.is_available() or i >= torch.cuda.device_count():
            p.error(f"--device {a.device}: no such CUDA device here (try --device cpu --quick)")
        torch.cuda.set_device(i)
    a.arch,a.size,a.bs,a.batches,a.rounds = ('resnet18', 32, 8, 3, 2) if a.quick else ('resnet50', 224, 128, 10, 3)
    only = set(a.only.split(',')) if a.only else {'tests', 'cold', 'probe', 'overhead', 'syncs', 'landscape', 'compile'}
    name = torch.cuda.get_device_name(a.device) if a.cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"fastexplorer GPU checks on {name}; torch {torch.__version__}; {'quick' if a.quick else 'full'} sizes", flush=True)
    global OUT
    OUT = a.out
    HEAD[:] = [f"GPU checks on {name}, torch {torch.__version__}, {'quick' if a.quick else 'full'} sizes "
               f"({a.arch} at {a.size} px, batch {a.bs}, {a.batches} batches an epoch, {a.rounds} rounds)", '']
    tmp = tempfile.mkdtemp()
    sections = [('tests', lambda: None if a.skip_tests else cuda_tests(a)), ('cold', lambda: cold(a)),
                ('probe', lambda: probe(a))]
    def sy(): syncs(a, {'plain fit': make_learner(a, a.arch, n=30),
                        'explorer defaults': make_learner(a, a.arch, ExplorerCallback(f'{tmp}/syncs', overwrite=True), n=30)})
    sections += [('overhead', lambda: overhead(a, tmp)), ('syncs', sy), ('landscape', lambda: landscape(a, make_learner(a, a.arch, n=2))),
                 ('compile', lambda: compiled(a, tmp))]
    failed = []
    for s,f in sections:
        if s not in only: continue
        faulthandler.dump_traceback_later(a.stall, repeat=True)   # a stalled section shows where, and if it moves
        try: f()
        except Exception as e:
            failed.append(s); row(s, 'failed', f"{type(e).__name__}", str(e).splitlines()[0][:100] if str(e) else '')
        finally: faulthandler.cancel_dump_traceback_later()
    print(table(), flush=True)
    return 1 if failed else 0

if __name__ == '__main__': sys.exit(main())
