"""The bug zoo (issue 32): training bugs users reported in public, each ported to fastai with its accepted fix as a twin,
and healthy runs of real fastai tasks. A case is a function `build(fixed:bool)->Learner` registered with `@case(...)`,
which says where the report is, what the bug is and which alerts name its cause (the truth, written before the run).

`run_case` trains a case with `ExplorerCallback(preflight=True)` and returns the alerts a user is asked to act on
(severity `warning` or `error`, first first); `judge` scores them as `../shared/DIAGNOSIS.md` does: *detected* if an
alert names the cause, *first* if the first one does, a *false alarm* if a fixed twin or a healthy run raises any. An
alert names the cause if its kind is in the case's truth and its hint is no checklist: a hint naming causes of three or
more kinds (`cause_kinds`: scale, learning rate, activation, targets, gradients, initialisation) names none. A fixed
twin counts as healthy only if it `trains` (its last losses at most 0.9× its first).
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
from fastai.callback.core import Callback
from fastai.learner import Learner
from fastai.optimizer import OptimWrapper
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastai.callback.schedule import *   # noqa: F403  (Learner.fit_one_cycle)
from fastexplorer.all import *

CASES = {}
FAMILIES = ('bugs_contract', 'bugs_training', 'bugs_data', 'bugs_optim', 'bugs_fresh', 'bugs_fresh_loop', 'bugs_fresh3',
            'bugs_fresh3_loop', 'bugs_fresh4', 'bugs_fresh5', 'bugs_fresh6', 'bugs_fresh7', 'healthy',
            'healthy_more', 'bugs_fresh8', 'bugs_fresh9', 'bugs_fresh10',
            'bugs_fresh11', 'bugs_fresh_gh', 'bugs_fresh_so', 'bugs_fresh_forum',
            'bugs_fresh_forum2', 'bugs_fresh_gh2', 'bugs_fresh_so2',
            'bugs_fresh_forum3', 'bugs_fresh_so3', 'bugs_fresh_blog2', 'bugs_fresh_gh3',
            'bugs_fresh_fastai2', 'bugs_fresh_gh4', 'bugs_fresh_keras2', 'bugs_fresh_gh5', 'bugs_fresh_so5',
            'bugs_fresh_ptforum5', 'bugs_fresh_gh6', 'bugs_fresh_so6',
            'bugs_fresh_pf6', 'bugs_fresh_so7', 'bugs_fresh_gh7', 'bugs_fresh_gh8', 'bugs_fresh_hf8', 'bugs_fresh_ds8',
            'bugs_fresh_fa9', 'bugs_fresh_so9', 'bugs_fresh_pf9', 'bugs_fresh_gh9', 'bugs_fresh_gh10', 'bugs_fresh_gh11',
            'bugs_fresh_gh12', 'bugs_fresh_gh13', 'bugs_fresh_gh14', 'bugs_fresh_gh15', 'bugs_fresh_gh16',
            'bugs_fresh_gh17', 'bugs_fresh_gh18', 'bugs_fresh_pf10', 'bugs_fresh_so10',
            'bugs_fresh_gh19', 'healthy_recipes', 'healthy_recipes2', 'healthy_recipes3')   # the modules holding cases

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
    fit:str = 'fit'          # `fit`, `fit_one_cycle`, `fit_flat_cos` or `fine_tune`
    every:int = 1            # `ExplorerCallback(every=...)`
    fit_kw:dict = field(default_factory=dict)   # more arguments of the fit (`pct_start`, `freeze_epochs`…)
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

class BatchLosses(Callback):
    "Every training batch's loss as the loss function returned it (not fastai's smoothed one), in `losses`"
    order = 100
    def __init__(self): self.losses = []   # every fit's (`fine_tune` makes two)
    def after_loss(self):
        if self.training and isinstance(self.learn.loss, torch.Tensor) and self.learn.loss.numel() == 1:
            self.losses.append(float(self.learn.loss.detach()))

def run_case(c:Case, fixed:bool, path, seed:int=0):
    """Train case `c` (its fixed twin if `fixed`) under `ExplorerCallback(preflight=True)`: the alerts to act on, and the
    run, with its training batches' losses as `run.losses`"""
    random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)
    learn = c.build(fixed)
    bl = BatchLosses()
    learn.add_cbs([ExplorerCallback(path, every=c.every, preflight=True, verbose=0), bl])   # the bench prints its own table
    try:
        with learn.no_bar(), learn.no_logging():
            getattr(learn, c.fit)(c.epochs, *([c.lr] if c.lr is not None else []), **c.fit_kw)
    except Exception: pass   # a buggy program may crash (a class index out of range): what was said before the crash counts
    finally: learn.remove_cbs([ExplorerCallback, bl])
    run = load_run(path)
    run.losses = getattr(bl, 'losses', [])
    al = run.alerts
    return al[al.severity.isin(ACT_ON) & al.state.ne('resolved')].reset_index(drop=True), run   # the active ones

def loss_ratio(losses:list)->float:
    "The median of the last tenth (3 batches at least) of a run's finite batch `losses` over that of its first tenth (NaN if none)"
    v = [x for x in losses if math.isfinite(x)]
    if not v: return math.nan
    w = max(3, len(v) // 10)
    first,last = float(np.median(v[:w])),float(np.median(v[-w:]))
    return last / first if first > 0 else math.nan

def trains(losses:list)->bool:
    "Whether a run learnt: its last losses at most 0.9× its first (`loss_ratio`), with no NaN or Inf among them"
    return all(math.isfinite(x) for x in losses) and loss_ratio(losses) <= 0.9

CAUSE_WORDS = {   # the words (lower case, matched inside the text) by which a hint names a cause of each kind
    'scale': ('normalis', 'normaliz', 'standardis', 'standardiz', 'unscaled', 'scale the input', 'input scale',   # the inputs'
              'scale of the input', 'inputs scaled', 'pixels divided'),   # (the targets' scale is the targets')
    'learning rate': ('learning rate', 'lr_find', 'warm-up', 'warmup', 'step size', 'steps are too'),
    'activation': ('activation', 'softmax', 'sigmoid', 'relu', 'rectifier', 'tanh', 'gelu', 'logits', 'saturat'),
    'targets': ('target', 'label', 'one-hot', 'multi-hot', 'class indices'),
    'gradients': ('gradient', 'clip', 'backward', 'zero_grad'),
    'initialisation': ('initialis', 'initializ', 'zero weights', 'weights at zero'),
}

def cause_kinds(text:str)->set:
    "The kinds of cause (`CAUSE_WORDS`) that `text`, a hint, names"
    t = (text or '').lower()
    return {k for k,ws in CAUSE_WORDS.items() if any(w in t for w in ws)}

def is_checklist(text:str)->bool:
    "Whether `text` names causes of three kinds or more: a hint naming every cause names none"
    return len(cause_kinds(text)) >= 3

def names_cause(c:Case, a)->bool:
    "Whether alert `a` (a row) names the cause of case `c`: its kind is the truth's, at the culprit layer, and its hint no checklist"
    at = a['layer'] if isinstance(a['layer'], str) else ''
    said = a.get('hint') if isinstance(a.get('hint'), str) and a.get('hint') else a.get('message')
    return (a['kind'] in c.kinds and (c.layer is None or c.layer in (at, at.rpartition('.')[0]))   # the layer, or one of its parameters
            and not is_checklist(said if isinstance(said, str) else ''))

def judge(c:Case, alerts)->dict:
    "`detected`, `first` (right), the first alert's kind and layer, for a buggy run's `alerts`"
    rows = [r for _,r in alerts.iterrows()]
    return {'detected': any(names_cause(c, a) for a in rows), 'first': bool(rows) and names_cause(c, rows[0]),
            'first_alert': f"{rows[0]['kind']} {rows[0]['layer']!r}".strip() if rows else '-', 'n': len(rows)}
