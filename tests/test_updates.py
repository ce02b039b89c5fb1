"What the optimiser's steps did to the weights (`fastexplorer/updates.py`, issue 45): weights with gradients that never move, weight decay that collapses them, and a loss that ends above where it began"
import math, tempfile, warnings
from pathlib import Path
import pytest, torch
from torch import nn
from fastai.learner import Learner
from fastai.optimizer import Adam, OptimWrapper
from fastai.metrics import accuracy
from fastai.callback.core import Callback, CancelStepException
from fastai.callback.training import GradientAccumulation
from fastexplorer.callback import ExplorerCallback
from fastexplorer.run import load_run
from fastexplorer.losswatch import loss_alerts
from bugzoo import digits_raw, tensor_dls

class _SchedulerInsteadOfStep(Callback):
    "The classic loop `loss.backward(); scheduler.step()`: the scheduler is stepped where the optimiser should be, so no step is taken"
    def before_fit(self): self.sched = torch.optim.lr_scheduler.StepLR(self.learn.opt.opt, step_size=30)
    def before_step(self): self.sched.step(); raise CancelStepException()   # fastai's way for a callback to take over the step

def _torch_adam(params, **kw): return OptimWrapper(params, torch.optim.Adam, **kw)

def _digits(opt_func=Adam, cbs=(), wd=None, epochs=2, lr=1e-3, every=10, **cb_kw):
    "An MLP on sklearn's digits (pixels scaled to [0, 1]), trained under `ExplorerCallback`: its alerts (all of them) and its run"
    torch.manual_seed(0)
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    learn = Learner(tensor_dls(x / 16, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                    opt_func=opt_func, wd=wd, cbs=list(cbs))
    d = Path(tempfile.mkdtemp())
    learn.add_cb(ExplorerCallback(d/'run', every=every, preflight=False, **cb_kw))
    with warnings.catch_warnings(), learn.no_bar(), learn.no_logging():
        warnings.simplefilter('ignore')
        learn.fit(epochs, lr)
    run = load_run(d/'run')
    return run.alerts, run

def _active(al): return al[al.severity.isin(['warning', 'error']) & al.state.ne('resolved')]

def test_a_step_never_taken_leaves_the_weights_frozen():
    "A scheduler stepped in place of the optimiser: every parameter gets gradients and none changes; `frozen` says so with the evidence (the update ratios saw no step)"
    torch.manual_seed(0)
    al, run = _digits(_torch_adam, cbs=[_SchedulerInsteadOfStep()])
    fr = al[al.kind.eq('frozen')]
    assert len(fr) and set(fr.epoch) == {1, 2}, list(zip(al.kind, al.message))
    m = fr.message.iloc[0]
    assert fr.layer.iloc[0] == '0.weight' and 'did not change at all' in m and 'gradients were not zero' in m and '3 layers after' in m, m

def test_a_step_taken_or_recorded_without_ratios_is_not_frozen():
    "The same MLP trained as it should be, with the update ratios off (`updates=False`) and with gradients accumulated past an epoch (no step reached in it): no `frozen`"
    for kw in ({'updates': False}, {'cbs': [GradientAccumulation(n_acc=32 * 60)]}):
        al, _ = _digits(**kw)
        assert 'frozen' not in set(al.kind), (kw, list(zip(al.kind, al.message)))

@pytest.mark.parametrize('opt_func,wd', [(Adam, 100.), (_torch_adam, 0.5)], ids=['decoupled', 'l2_under_adam'])
def test_weight_decay_that_collapses_the_weights_is_named(opt_func, wd):
    "Weight decay set absurdly high (fastai's Adam with `true_wd`, torch's Adam with an L2 term): the weight matrices collapse, the loss stays at chance, and `wd_too_high` is the first finding"
    al, _ = _digits(opt_func, wd=wd, epochs=4)
    act = _active(al)
    last = act[act.epoch.eq(act.epoch.max())]
    assert len(last) and last.kind.iloc[0] == 'wd_too_high', list(zip(last.kind, last.message))
    assert 'shrank to' in last.message.iloc[0] and f'weight decay {wd:g}' in last.message.iloc[0], last.message.iloc[0]

@pytest.mark.parametrize('opt_func,wd', [(Adam, 0.01), (_torch_adam, 0.05)], ids=['fastai_default', 'l2_usual'])
def test_usual_weight_decay_raises_nothing(opt_func, wd):
    "The same MLP under a usual weight decay learns, and nothing is raised"
    al, run = _digits(opt_func, wd=wd, epochs=4)
    assert list(zip(al.kind, al.message)) == []

def test_a_loss_that_ends_above_its_first_batch_is_judged():
    "Adam at an SGD learning rate (the shape of the zoo's LSTM language model: 4.6 at the first batch, 15 at the third, down to 9): the first window holds the jump, so only the loss before any step shows that the run ended worse; `lr_too_high`"
    v = [4.6, 13.0, 15.4] + [13.0 - 4.0 * i / 105 + 0.3 * (-1) ** i for i in range(105)]
    al = loss_alerts(v, None, {}, wait=(22, 40))
    assert [a['kind'] for a in al] == ['lr_too_high'] and 'jumped from 4.6' in al[0]['message'], al
    assert loss_alerts([4.6 * 0.97 ** i for i in range(108)], None, {}, wait=(22, 40)) == []   # a loss that falls: nothing
