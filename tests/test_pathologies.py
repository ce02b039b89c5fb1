"Pathologies injected into real architectures (random weights): each is named first by its own alert, with the layer at fault and a hint."
import pytest, torch
from torch import nn
from torch.utils._pytree import tree_leaves
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastai.torch_core import params
from fastexplorer.all import *
from zoo import resnet18_tv, tabular, text_classifier
from test_alerts import _fit, mobilenet, small_vit, fastai_vision

def _named_first(run, kind:str, layer:str, epoch:int=1)->dict:
    "Check that the first alert of `epoch`, in its file and in `run.alerts`, is of `kind`, names `layer` and has its hint; return it"
    alerts = run.epochs[epoch - 1]['alerts']
    msgs = [a['message'] for a in alerts]
    assert alerts and (alerts[0]['kind'], alerts[0]['layer']) == (kind, layer), (kind, layer, msgs)
    assert alerts[0]['hint'], msgs   # the default hint, or one the evidence chose (`losswatch.explain`)
    first = run.alerts.query("epoch == @epoch and source != 'preflight'").iloc[0]   # what training showed (preflight's come first)
    assert (first.kind, first.layer) == (kind, layer), msgs
    return alerts[0]

def _only_nonfinite(run, epoch:int=1):
    "A run whose activations are NaN has no alert but the non-finite ones"
    alerts = run.epochs[epoch - 1]['alerts']
    assert {a['kind'] for a in alerts} == {'nonfinite'}, [a['message'] for a in alerts]

def _after(model:nn.Module, path:str, m:nn.Module)->str:
    "Put `m` right after module `path` of `model` (the two in an `nn.Sequential` at `path`); returns the path of `m`"
    parent,_,name = path.rpartition('.')
    setattr(model.get_submodule(parent), name, nn.Sequential(model.get_submodule(path), m))
    return f'{path}.1'

# ---- dead units ----

DEAD = {'resnet18_tv': (resnet18_tv, 'bn1', 'relu'), 'mobilenet': (mobilenet, 'features.1.block.0.1', 'features.1.block.0.2')}

@pytest.mark.parametrize('name', DEAD)
def test_dead_units_behind_a_batchnorm_bias(name, tmp_path):
    "A BatchNorm's bias set to -100 before a ReLU called once: a normalised value is at most √(N·H·W) (32 and 16 here), so no unit of the ReLU is ever positive, and none of its zero gradients moves the bias; the dead alert names the ReLU first (the BatchNorms behind it, which get only zero gradients, are not 'frozen')"
    make,bn,relu = DEAD[name]
    learn = make()
    with torch.no_grad(): learn.model.get_submodule(bn).bias.fill_(-100.)
    run = _fit(learn, tmp_path/'run')
    a = _named_first(run, 'dead', relu)
    assert (a['rule'], a['value']) == ('never positive', 1.0), a['message']
    assert not any(a['kind'] == 'frozen' for a in run.epochs[0]['alerts']), [a['message'] for a in run.epochs[0]['alerts']]

# ---- NaN from a parameter-free module ----

class Log(nn.Module):
    "`torch.log` of its input, a parameter-free line of a `forward`"
    def forward(self, x): return torch.log(x)

def _log_after_resnet_bn(learn): return _after(learn.model, 'layer1.0.bn1', Log())
def _log_after_tabular_bn(learn): learn.model.layers[0].append(Log()); return 'layers.0.3'          # LinBnDrop: Linear, ReLU, BatchNorm
def _log_after_classifier_bn(learn): learn.model[1].layers[0].insert(1, Log()); return '1.layers.0.1'  # LinBnDrop: BatchNorm, Dropout, ...

LOG = {'resnet18_tv': (resnet18_tv, _log_after_resnet_bn), 'tabular': (tabular, _log_after_tabular_bn),
       'text_classifier_deterministic': (text_classifier, _log_after_classifier_bn)}

@pytest.mark.parametrize('name', LOG)
def test_nan_from_a_parameter_free_module(name, tmp_path):
    "`Log` after a BatchNorm, whose output in training has a zero mean in each unit and so values below 0: the first alert names `Log` and `aten::log`, from finite inputs, and no alert of another kind comes with it (the AWD_LSTM runs under `torch.use_deterministic_algorithms`, whose `new_empty` returns NaN: its dropout mask is no origin)"
    make,inject = LOG[name]
    learn = make()
    layer = inject(learn)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(was or name.endswith('_deterministic'))
    try: run = _fit(learn, tmp_path/'run')
    finally: torch.use_deterministic_algorithms(was)
    a = _named_first(run, 'nonfinite', layer)
    assert (a['stat'], a['op'], a['inputs_finite'], a['param'], a['step']) == ('op', 'aten::log', True, None, 0), a['message']
    act = next(a for a in run.epochs[0]['alerts'] if a['stat'] == 'act')   # the statistics' alert: the first batch's first layer to hold one
    assert act['layer'] == layer, act['message']
    _only_nonfinite(run)

# ---- NaN born in the backward pass ----

class Spread(nn.Module):
    "Adds the spread of a difference that is zero here (a standard deviation of a constant): 0 going forward, but the derivative of its square root there is 0 · ∞"
    def forward(self, x): return x + (x - x).pow(2).mean().sqrt()

def _spread_after_resnet_bn(learn): return _after(learn.model, 'layer1.0.bn1', Spread())
def _spread_after_tabular_bn(learn): learn.model.layers[0].append(Spread()); return 'layers.0.3'

SPREAD = {'resnet18_tv': (resnet18_tv, _spread_after_resnet_bn), 'tabular': (tabular, _spread_after_tabular_bn)}

@pytest.mark.parametrize('name', SPREAD)
def test_nan_born_in_the_backward_pass(name, tmp_path):
    "`Spread` after a BatchNorm: every activation is finite, the gradients are not; the batch is run again with its backward, and the first alert names `Spread` and the backward's `aten::div` of the square root, from finite inputs"
    make,inject = SPREAD[name]
    learn = make()
    layer = inject(learn)
    run = _fit(learn, tmp_path/'run')
    a = _named_first(run, 'nonfinite', layer)
    assert (a['stat'], a['phase'], a['op'], a['inputs_finite'], a['step']) == ('op', 'backward', 'aten::div', True, 0), a['message']
    assert 'SqrtBackward0' in a['message'] and 'gradient' in a['message'], a['message']
    nan = run.query_steps(layers=layer, stats='nan', kinds='act').set_index('step').value
    assert nan.loc[0] == 0, nan            # finite on the batch whose gradients broke: the NaN reached activations through the weights
    _only_nonfinite(run)

# ---- NaN from too high a learning rate ----

def _first_made_nonfinite(learn)->tuple:
    "Forward hooks on every module: `[(step, path)]` of the first module, in the order they return, whose output is not finite from finite inputs"
    bad = lambda o: any(isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in tree_leaves(o))
    seen = []
    def hook(path):
        def f(m, i, o):   # training batches only: the validation and the callback's own re-run go without gradients
            if not seen and torch.is_grad_enabled() and bad(o) and not bad(i): seen.append((learn.train_iter, path))
        return f
    return seen,[m.register_forward_hook(hook(p)) for p,m in learn.model.named_modules()]

@pytest.mark.parametrize('make', [resnet18_tv, small_vit])
def test_nan_from_too_high_a_learning_rate(make, tmp_path):
    "Adam at lr 1e20: its first step moves each weight by at most the lr (finite), the next forward overflows; the first alert names the first module whose output a forward hook saw turn non-finite from finite inputs, at that step, and no alert of another kind comes with it"
    learn = make()
    seen,hooks = _first_made_nonfinite(learn)
    try: run = _fit(learn, tmp_path/'run', lr=1e20)
    finally:
        for h in hooks: h.remove()
    assert seen, [a['message'] for a in run.epochs[0]['alerts']]
    step,layer = seen[0]
    a = _named_first(run, 'nonfinite', layer)
    assert (a['stat'], a['step'], a['inputs_finite'], a['param']) == ('op', step, True, None), a['message']
    _only_nonfinite(run)

# ---- exploding and vanishing gradients ----

class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k): ctx.k = k; return x.clone()
    @staticmethod
    def backward(ctx, g): return g * ctx.k, None

class ScaleGrad(nn.Module):
    "The identity, whose backward multiplies the gradient by `k`: what a stack of layers that amplify (or damp) gradients does to those before it"
    def __init__(self, k:float): super().__init__(); self.k = k
    def forward(self, x): return _Scale.apply(x, self.k)

FIRST = {'resnet18_tv': (resnet18_tv, 'conv1'), 'tabular': (tabular, 'embeds.0')}

@pytest.mark.parametrize('name', FIRST)
@pytest.mark.parametrize('kind,k', [('exploding_grad', 1e10), ('vanishing_grad', 1e-10)])
def test_exploding_and_vanishing_gradients(kind, k, name, tmp_path):
    "`ScaleGrad(k)` right after the first weight: the forward is unchanged (no NaN, no dead unit) and only that weight's gradient is k times larger, so its ratio to the last weight's, within 1e±4 for these models untouched (`test_no_alerts_on_healthy_training`), is beyond 1e±6; the alert names that weight, the first in execution order"
    make,first = FIRST[name]
    learn = make()
    _after(learn.model, first, ScaleGrad(k))
    run = _fit(learn, tmp_path/'run')
    a = _named_first(run, kind, f'{first}.0.weight')
    assert (a['value'] > 1e6) if kind == 'exploding_grad' else (a['value'] < 1e-6), a['message']

# ---- a layer whose learning rate is 0 ----

def _tabular_split(m): return [params(m.embeds), [p for n,p in m.named_parameters() if not n.startswith('embeds.')]]
ZERO_LR = {'fastai_vision': (fastai_vision, None, '0.0.weight'), 'tabular': (tabular, _tabular_split, 'embeds.0.weight')}

@pytest.mark.parametrize('name', ZERO_LR)
def test_frozen_by_a_zero_learning_rate(name, tmp_path):
    "Discriminative learning rates with 0 for the first parameter group (fastai's own split of a vision learner; embeddings apart in a tabular model): its weights require grad and get gradients but never move; the frozen alert names the first of them and lists only that group's parameters"
    make,split,layer = ZERO_LR[name]
    learn = make()
    if split is not None: learn.splitter = split
    groups = learn.splitter(learn.model)
    names = {id(p): n for n,p in learn.model.named_parameters()}
    run = _fit(learn, tmp_path/'run', lr=[0.] + [1e-3] * (len(groups) - 1))
    a = _named_first(run, 'frozen', layer)
    assert set(a['layers']) <= {names[id(p)] for p in groups[0]}, a['message']

# ---- a layer the optimiser does not hold ----

def _new_conv(learn): learn.model.layer1[0].conv2 = nn.Conv2d(64, 64, 3, padding=1, bias=False); return 'layer1.0.conv2'
def _new_head(learn): learn.model.heads.head = nn.Linear(32, 10); return 'heads.head'
NOT_HELD = {'resnet18_tv': (resnet18_tv, _new_conv), 'small_vit': (small_vit, _new_head)}

@pytest.mark.parametrize('name', NOT_HELD)
def test_layer_the_optimiser_does_not_hold(name, tmp_path):
    "A layer replaced after `create_opt`: `fit` keeps the optimiser it has (`reset_opt=False`), so the new layer gets gradients and never moves; the frozen alert names it first"
    make,replace = NOT_HELD[name]
    learn = make()
    learn.create_opt()
    path = replace(learn)
    new = list(learn.model.get_submodule(path).parameters())
    held = lambda: {id(p) for p,*_ in learn.opt.all_params()}
    assert not {id(p) for p in new} & held()
    run = _fit(learn, tmp_path/'run')
    assert not {id(p) for p in new} & held()                               # fastai did not rebuild it
    mine = sorted(f'{path}.{n}' for n,_ in learn.model.get_submodule(path).named_parameters())   # one module: in order of name
    a = _named_first(run, 'frozen', mine[0])
    assert a['layers'] == mine, a['message']
    pre = run.alerts.query("source == 'preflight'").iloc[0]                 # and preflight said so before the first step
    assert (pre.kind, pre.layer) == ('optimizer_groups', path), pre.message
