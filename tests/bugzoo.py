"""The bug zoo (issue 32): training bugs users reported in public, each ported to fastai with its accepted fix as a twin,
and healthy runs of real fastai tasks. A case is a function `build(fixed:bool)->Learner` registered with `@case(...)`,
which says where the report is, what the bug is and which alerts name its cause (the truth, written before the run).

`run_case` trains a case with `ExplorerCallback(preflight=True)` and returns the alerts a user is asked to act on
(severity `warning` or `error`, first first); `judge` scores them as `../shared/DIAGNOSIS.md` does: *detected* if an
alert names the cause, *first* if the first one does, a *false alarm* if a fixed twin or a healthy run raises any.
Cases live in `bugs_*.py` (one file per family of bugs) and `healthy.py`; `cases()` gathers them.

Every buggy case falls in one of two halves by a rule fixed before any tuning (`Case.half`: the parity of the SHA-256 of
its URL). Thresholds are tuned on the `dev` half only; the `held-out` half and the healthy runs measure what users get."""
import hashlib, importlib, math, random
from dataclasses import dataclass, field
from functools import partial
import numpy as np, torch, torch.nn.functional as F
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.optimizer import OptimWrapper
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastai.callback.schedule import *   # noqa: F403  (Learner.fit_one_cycle)
from fastexplorer.all import *

CASES = {}
FAMILIES = ('bugs_contract', 'bugs_training', 'bugs_data', 'bugs_optim', 'healthy')   # the modules holding cases

@dataclass
class Case:
    name:str                 # the function's name
    build:object             # `build(fixed:bool)->Learner`
    source:str               # where the bug was reported (a URL); '' for a healthy run
    bug:str                  # what is wrong, in a line ('' for a healthy run)
    kinds:frozenset          # the alert kinds that name the cause (empty for a healthy run)
    layer:str|None = None    # the culprit layer, where one is at fault: the alert must name it
    epochs:int = 3           # epochs to train, as the report did (scaled down to seconds on a CPU)
    lr:float|None = None     # the report's learning rate (`None`: fastai's default)
    fit:str = 'fit'          # `fit` or `fit_one_cycle`
    every:int = 1            # `ExplorerCallback(every=...)`
    healthy:bool = field(default=False)

    @property
    def half(self)->str:
        "`dev` or `held-out`, by a fixed rule made before any tuning: the parity of the SHA-256 of the source URL"
        if self.healthy: return 'healthy'
        return 'held-out' if int(hashlib.sha256(self.source.encode()).hexdigest(), 16) % 2 else 'dev'

def case(source:str, bug:str, kinds, layer=None, **kw):
    "Register a buggy program with its fixed twin: `kinds` are the alert kinds that name its cause"
    def deco(f):
        CASES[f.__name__] = Case(f.__name__, f, source, bug, frozenset([kinds] if isinstance(kinds, str) else kinds), layer, **kw)
        return f
    return deco

def healthy(**kw):
    "Register a healthy run of a real fastai task (`build(fixed)` ignores `fixed`)"
    def deco(f):
        CASES[f.__name__] = Case(f.__name__, f, '', '', frozenset(), None, healthy=True, **kw)
        return f
    return deco

def cases()->dict:
    "Every registered case, by name"
    for m in FAMILIES: importlib.import_module(m)
    return CASES

# ---- what ports need ----
def torch_opt(opt, **kw):
    "A fastai `opt_func` running a `torch.optim` optimiser as the report did (`torch_opt(torch.optim.Adam)`)"
    return partial(OptimWrapper, opt=partial(opt, **kw))

def keras_ce(probs, y, eps=1e-7):
    "Keras's `sparse_categorical_crossentropy` on probabilities, as Keras computes it (clipped, then the log)"
    return F.nll_loss(torch.log(probs.clamp(eps, 1 - eps)), y)

def keras_bce(p, y, eps=1e-7):
    "Keras's `binary_crossentropy` on probabilities, as Keras computes it (clipped, then the log)"
    p = p.clamp(eps, 1 - eps)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()

def tensor_dls(x, y, bs=32, valid_pct=0.2, seed=0, shuffle=True)->DataLoaders:
    "fastai `DataLoaders` over tensors `x`, `y`, split at random (`seed`), the training set shuffled"
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    n = int(len(x) * valid_pct)
    def items(i): return [(x[j], y[j]) for j in i.tolist()]
    train = DataLoader(items(idx[n:]), bs=bs, shuffle=shuffle, drop_last=True)
    train.rng = random.Random(seed)
    return DataLoaders(train, DataLoader(items(idx[:n]), bs=bs))

def digits_raw():
    "scikit-learn's 8×8 digits as the file has them: `(n, 64)` float pixels from 0 to 16, integer labels"
    from sklearn.datasets import load_digits
    d = load_digits()
    return torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target, dtype=torch.long)

# ---- running and judging ----
ACT_ON = ('warning', 'error')

def run_case(c:Case, fixed:bool, path, seed:int=0):
    "Train case `c` (its fixed twin if `fixed`) under `ExplorerCallback(preflight=True)`: the alerts to act on, and the run"
    random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)
    learn = c.build(fixed)
    learn.add_cb(ExplorerCallback(path, every=c.every, preflight=True))
    try:
        with learn.no_bar(), learn.no_logging(): getattr(learn, c.fit)(c.epochs, *([c.lr] if c.lr is not None else []))
    except Exception: pass   # a buggy program may crash (a class index out of range): what was said before the crash counts
    finally: learn.remove_cb(ExplorerCallback)
    run = load_run(path)
    al = run.alerts
    return al[al.severity.isin(ACT_ON)].reset_index(drop=True), run

def names_cause(c:Case, a)->bool:
    "Whether alert `a` (a row) names the cause of case `c`"
    at = a['layer'] if isinstance(a['layer'], str) else ''
    return a['kind'] in c.kinds and (c.layer is None or c.layer in (at, at.rpartition('.')[0]))   # the layer, or one of its parameters

def judge(c:Case, alerts)->dict:
    "`detected`, `first` (right), the first alert's kind and layer, for a buggy run's `alerts`"
    rows = [r for _,r in alerts.iterrows()]
    return {'detected': any(names_cause(c, a) for a in rows), 'first': bool(rows) and names_cause(c, rows[0]),
            'first_alert': f"{rows[0]['kind']} {rows[0]['layer']!r}".strip() if rows else '-', 'n': len(rows)}
