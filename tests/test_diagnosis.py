"""Bugs users make, as they reported them (a case cites its source), and what the alerts say of them (issue 32): each
reported case is a small fastai port of the program, and the first alert must name the cause."""
import math
import torch, torch.nn.functional as F
from torch import nn
from fastai.basics import Learner
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *

def _fit(learn, n=1, lr=1e-2):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, lr)

def test_a_loss_that_takes_the_log_of_a_softmax_is_named_not_the_layers(tmp_path):
    """A hand-written cross-entropy, `log(softmax(out))`, gives an infinite loss once a probability underflows to 0, and
    NaN gradients: the first alert names the loss (an error), not the layer whose gradients turned NaN after it.
    Source: https://discuss.pytorch.org/t/calculate-loss-between-a-target-in-one-hot-encoded-with-class-probabilities/180148"""
    torch.manual_seed(0)
    def loss(out, y): return F.nll_loss(torch.log(F.softmax(out * 100, dim=1)), y)   # the temperature makes 0 come early
    learn = Learner(digits_dls(bs=64), nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)), loss_func=loss,
                    cbs=ExplorerCallback(tmp_path/'run', every=1))
    _fit(learn, 1, 1e-1)
    al = load_run(tmp_path/'run').alerts
    first = al.iloc[0]                      # preflight saw it on the first batch: a finite loss, a NaN gradient at the output
    no_layer = lambda a: not isinstance(a.layer, str)   # a finding about the run as a whole names no layer in `run.alerts`
    assert (first.kind, no_layer(first), first.severity, first.source) == ('nonfinite_loss', True, 'error', 'preflight'), al[['kind', 'layer', 'message']]
    live = al[al.source == 'live'].iloc[0]
    assert (live.kind, no_layer(live), live.severity) == ('nonfinite_loss', True, 'error'), al[['kind', 'layer', 'message']]
    epoch = al[al.source == 'epoch']
    assert epoch.iloc[0].kind == 'nonfinite_loss', epoch[['kind', 'layer']]     # first among the epoch's alerts too
    assert 'loss function' in first.message and 'logits' in first.hint and 'loss function' in live.message

def test_softmax_over_one_unit_names_the_softmax(tmp_path):
    """A binary classifier ending in `Dense(1)` and a softmax: the output is always 1 and nothing learns. The first alert
    names the softmax, whose one unit never varies, before the model's own output, which only passes it on.
    Source: "Why does a binary Keras CNN always predict 1?", https://techfeed.net/es/456718/ (a Stack Overflow mirror)"""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 1), nn.Softmax(dim=1))
    def bce(out, y): return F.binary_cross_entropy(out.squeeze(1).clamp(1e-7, 1 - 1e-7), (y > 4).float())
    learn = Learner(digits_dls(bs=64), model, loss_func=bce, cbs=ExplorerCallback(tmp_path/'run', every=1))
    _fit(learn, 2)
    al = load_run(tmp_path/'run').alerts.query("source == 'epoch'")
    first = al.iloc[0]
    assert (first.kind, first.layer) == ('dead', '4'), al[['kind', 'layer', 'message']]
    assert '4' in first.layers and first.layers.index('4') < first.layers.index('')   # the softmax, then the output it makes

def test_a_constant_layer_in_full_batch_training_is_flagged_from_the_second_epoch(tmp_path):
    """Full-batch training (one batch an epoch): a layer constant in every epoch is flagged from the second epoch on,
    where before the zero-initialisation exemption (one call in the epoch) hid it in every epoch. (A regression test of
    the defect, not a reported case: a zeroed `Linear` with a bias of -1, ahead of a ReLU.)"""
    torch.manual_seed(0)
    dls = digits_dls(bs=1438)                  # every training image (1,797 less 359 held out) in one batch
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    with torch.no_grad(): model[1].weight.zero_(); model[1].bias.fill_(-1.)   # `1` never positive: its ReLU constant at 0
    learn = Learner(dls, model, loss_func=nn.CrossEntropyLoss(), cbs=ExplorerCallback(tmp_path/'run', every=1))
    _fit(learn, 3)
    assert len(learn.dls.train) == 1
    al = load_run(tmp_path/'run').alerts.query("source == 'epoch' and kind == 'dead'").set_index('epoch')
    assert '1' not in al.loc[1, 'layers'] and al.loc[1, 'layer'] == '2', al   # epoch 1: only its ReLU, never positive
    assert list(al.loc[[2, 3], 'layer']) == ['1', '1'], al                   # then the layer itself, constant, first

def test_the_page_shows_each_alerts_severity(tmp_path):
    "The page lists the loss's alert first, marked as an error, naming the loss rather than a layer"
    import os, pytest
    if not os.path.exists('/usr/bin/chromium'): pytest.skip('no chromium')
    from test_browser import serving, SHOTS, ARGS, CHROMIUM
    from playwright.sync_api import sync_playwright, expect
    test_a_loss_that_takes_the_log_of_a_softmax_is_named_not_the_layers(tmp_path)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = b.new_page(viewport={'width': 1400, 'height': 900})
        with serving(page, tmp_path) as srv:
            page.goto(srv.url + '?run=run')
            first = page.locator('#alerts .alert').first
            expect(first.locator('.alert-sev')).to_have_text('error')
            expect(first.locator('.alert-kind')).to_have_text('nonfinite loss')
            expect(first.locator('.alert-layer')).to_have_text('(the loss)')
            SHOTS.mkdir(exist_ok=True); page.screenshot(path=str(SHOTS/'alerts-severity.png'))
        b.close()

# the hints as they read when issue 45 was filed (fastexplorer/alerts.py `HINTS`, fastexplorer/contract.py's fixes): the
# measurement's own examples, kept here as text so that rewriting a hint does not change what this test checks
LOSS_STALLED = ("nothing is learnt: check that the output activation, the loss and the targets fit, that the inputs are "
                "normalised, that gradients reach the parameters, and that the inputs carry the labels")
SATURATED = ("inputs too large for a squashing activation: normalise what feeds it (the inputs, or a BatchNorm before it), "
             "lower the learning rate, or use a ReLU-family activation; a sigmoid output facing targets outside [0, 1] is "
             "pushed to its limits")
LR_TOO_HIGH = ("the steps are too large for this model: lower the learning rate (fastai's `lr_find` suggests one), or use a "
               "warm-up (`fit_one_cycle`)")
NONFINITE_LOSS = ("the loss function made it from finite outputs: a log of a probability that reached 0 (give logits to a "
                  "loss that takes them, such as `CrossEntropyLossFlat`, or clamp), a division by a count that can be 0, or "
                  "targets outside the range the loss expects")
LOSS_AT_INIT = "the initial predictions are confidently wrong: scale the inputs, or initialise the last layer smaller"
TARGET_RANGE = "scale the targets, or remove the output's squashing activation"   # the targets' scale is no input scale

def test_a_hint_that_names_every_cause_names_none():
    "The six kinds of cause read off real hints by keyword; three kinds or more make a checklist, which names no cause"
    import pandas as pd
    from bugzoo import Case, CAUSE_WORDS, cause_kinds, is_checklist, judge
    from fastexplorer.losswatch import loss_alerts
    assert cause_kinds(LOSS_STALLED) == {'activation', 'targets', 'scale', 'gradients'} and is_checklist(LOSS_STALLED)
    assert cause_kinds(SATURATED) == {'scale', 'activation', 'learning rate', 'targets'} and is_checklist(SATURATED)
    assert cause_kinds(LR_TOO_HIGH) == {'learning rate'} and not is_checklist(LR_TOO_HIGH)
    assert cause_kinds(NONFINITE_LOSS) == {'activation', 'targets'} and not is_checklist(NONFINITE_LOSS)
    assert cause_kinds(LOSS_AT_INIT) == {'scale', 'initialisation'} and not is_checklist(LOSS_AT_INIT)
    assert cause_kinds(TARGET_RANGE) == {'targets', 'activation'} and not is_checklist(TARGET_RANGE)
    assert cause_kinds('') == set() and cause_kinds('a parameter DDP does not synchronise') == set()
    flat = loss_alerts([2.3] * 60, 2.3, {})   # losswatch's own alert on a flat loss at chance: its hint, whatever it says now
    assert flat and flat[0]['kind'] in ('loss_stalled', 'lr_too_low') and isinstance(flat[0]['hint'], str)
    assert cause_kinds(flat[0]['hint']) <= set(CAUSE_WORDS)
    c = Case('stalls', None, 'https://example.org/q', 'a stall', frozenset(['loss_stalled']))
    row = lambda hint: {'kind': 'loss_stalled', 'layer': None, 'hint': hint, 'message': 'the training loss has not fallen'}
    assert judge(c, pd.DataFrame([row(LOSS_STALLED)]))['detected'] is False          # the right kind, but a checklist
    one = row("the learning rate of 1e-5 moves the weights by 1e-6 of their size a step: raise it")
    assert judge(c, pd.DataFrame([one]))['first'] is True                             # one cause, with its numbers
    j = judge(c, pd.DataFrame([row(LOSS_STALLED), one]))
    assert (j['detected'], j['first']) == (True, False), j                           # named, but not first
