"Issue 45, points 4, 5 and 8: the preflight's and the loss contract's reasoning, the module at fault named, NaN attributed; each from a real case."
import math, random
import numpy as np, pytest, torch
import torch.nn.functional as F
from torch import nn
from fastai.learner import Learner
from fastai.losses import MSELossFlat
from fastexplorer.all import *
from fastexplorer.preflight import *   # `Learner.preflight`
from bugzoo import tensor_dls, digits_raw, cases, keras_bce
from bugs_data import _TinyLM   # the zoo's next-token GRU: logits `(batch, vocab, length)`

def said(learn, b=None)->dict: return {v['check']: v for v in learn.preflight(b)}

def _diabetes():
    from sklearn.datasets import load_diabetes
    x, y = load_diabetes(return_X_y=True)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()

@pytest.mark.parametrize('loss', [nn.MSELoss(), F.mse_loss])
def test_outputs_and_targets_that_broadcast_under_mse_are_named(loss):
    """Outputs `(N, 1)`, targets `(N,)` under `nn.MSELoss`: they broadcast to `(N, N)` and the model learns the mean
    (PyTorch's own warning, "Using a target size (torch.Size([64])) that is different to the input size
    (torch.Size([64, 1]))", a common Stack Overflow question). Before: "outputs, loss and targets fit"."""
    torch.manual_seed(0)
    x, y = _diabetes()
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
    v = said(Learner(tensor_dls(x, y, bs=64), model, loss_func=loss))
    assert v['target_shape']['severity'] == 'error' and 'loss_contract' not in v, v
    assert '(64, 1)' in v['target_shape']['evidence'] and '(64, 64)' in v['target_shape']['evidence']
    assert v['target_shape']['layer'] == '2' and '`2`, a Linear with 1 output' in v['target_shape']['evidence']
    # the reverse, and the fix: fastai's flat loss, which flattens both
    v = said(Learner(tensor_dls(x, y.unsqueeze(1), bs=64), nn.Sequential(*model, nn.Flatten(0)), loss_func=loss))
    assert v['target_shape']['severity'] == 'error', v
    assert 'target_shape' not in said(Learner(tensor_dls(x, y, bs=64), model, loss_func=MSELossFlat()))

class _TokensRNN(nn.Module):
    "A text classifier: token ids `(batch, seq)` embedded, an LSTM, the last step's state into a linear layer"
    def __init__(self, batch_first, vocab=1000, n=4):
        super().__init__()
        self.emb, self.rnn, self.fc = nn.Embedding(vocab, 32), nn.LSTM(32, 64, batch_first=batch_first), nn.Linear(64, n)
    def forward(self, x): return self.fc(self.rnn(self.emb(x))[0][:, -1])

@pytest.mark.parametrize('batch_first', [False, True])
def test_an_lstm_over_token_ids_run_along_the_batch_is_found(batch_first):
    """yunjey/pytorch-tutorial#196 (`batch_first=True` removed while the input stays (batch, seq)) on token ids, as a
    text classifier feeds them: the check was skipped for integer inputs; now it goes through the embedding's output"""
    torch.manual_seed(0)
    ids, y = torch.randint(0, 1000, (400, 30)), torch.randint(0, 4, (400,))
    v = said(Learner(tensor_dls(ids, y, bs=32), _TokensRNN(batch_first), loss_func=nn.CrossEntropyLoss()))
    assert v['batch_independence']['severity'] == ('ok' if batch_first else 'error'), v['batch_independence']

def _cancer_with_missing():
    "scikit-learn's breast cancer features, standardised, one value of one row missing (NaN), as a CSV with a gap reads"
    from sklearn.datasets import load_breast_cancer
    x, y = load_breast_cancer(return_X_y=True)
    x = torch.tensor((x - x.mean(0)) / x.std(0), dtype=torch.float32)
    x[:, 3][torch.arange(len(x)) % 40 == 0] = math.nan        # a missing value every 40 rows
    return x, torch.tensor(y)

def test_nan_in_the_inputs_is_blamed_on_the_data(tmp_path):
    """Tabular rows with missing values fed without `FillMissing` (the fastai forums' "loss is nan" on tabular data):
    the input check dropped NaN silently and the NaN findings blamed the learning rate or a layer; now both the
    preflight and the live trace say the data holds them"""
    torch.manual_seed(0)
    x, y = _cancer_with_missing()
    mk = lambda: Learner(tensor_dls(x, y, bs=64, shuffle=False), nn.Sequential(nn.Linear(30, 16), nn.ReLU(), nn.Linear(16, 2)),
                         loss_func=nn.CrossEntropyLoss())
    v = said(mk())
    assert v['nonfinite_input']['severity'] == 'error' and v['nonfinite_input']['count'] >= 1, v
    assert v['nonfinite']['data'] and v['nonfinite']['layer'] == '', v['nonfinite']
    learn = mk()
    learn.add_cb(ExplorerCallback(tmp_path/'run', every=1, preflight=False))   # the live trace alone
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3)
    al = load_run(tmp_path/'run').alerts
    first = al[al.kind == 'nonfinite_input'].iloc[0]   # the data's finding, by its kind too
    assert "the data's" in first.message and 'FillMissing' in first.hint, first.to_dict()

def test_a_constant_output_is_not_excused_without_a_zero_layer():
    """A ReLU MLP whose hidden bias starts far below 0 (a hand-written initialisation): every unit is 0, the output is
    the last bias, the same for every sample, and only that bias gets a gradient. Before: "a zero-initialised last layer"
    and "all parameters get a finite gradient"; now a warning for each, and neither said of a real zero head"""
    torch.manual_seed(0)
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    with torch.no_grad(): model[0].bias.fill_(-100.)
    v = said(Learner(tensor_dls(x / 16, y), model, loss_func=nn.CrossEntropyLoss()))
    assert v['constant_output']['severity'] == 'warning' and 'zero-initialised' not in v['constant_output']['evidence'], v
    assert v['gradient_flow']['severity'] == 'warning' and 'exactly zero' in v['gradient_flow']['evidence'], v
    with torch.no_grad(): model[0].bias.zero_(); model[2].weight.zero_()    # a zero-initialised head: the excuse is true
    v = said(Learner(tensor_dls(x / 16, y), model, loss_func=nn.CrossEntropyLoss()))
    assert (v['constant_output']['severity'], v['gradient_flow']['severity']) == ('ok', 'ok'), v
    assert '`2.weight` is all zero' in v['constant_output']['evidence'] and 'exactly zero' in v['gradient_flow']['evidence']

class _FashionCNN(nn.Module):
    "The network of ai.stackexchange.com/questions/8491: two conv/ReLU/pool blocks, `F.relu(self.fc1(x))`, then `F.log_softmax`"
    def __init__(self, relu=True):
        super().__init__()
        self.conv1, self.conv2, self.pool, self.fc1, self.relu = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1), nn.MaxPool2d(2), nn.Linear(64, 10), relu
    def forward(self, x):
        x = self.pool(F.relu(self.conv2(self.pool(F.relu(self.conv1(x))))))
        x = self.fc1(x.view(x.size(0), -1))
        return F.log_softmax(F.relu(x) if self.relu else x, dim=1)

def test_a_relu_before_log_softmax_under_nll_is_named():
    """ai.stackexchange.com/questions/8491 ("Does it make sense to apply softmax on top of relu?"): class scores through a
    ReLU, then `log_softmax`, under `NLLLoss`; the output check looked only at the final `log_softmax` and passed"""
    torch.manual_seed(0)
    x, y = digits_raw()
    mk = lambda relu: Learner(tensor_dls((x / 16 - 0.3).view(-1, 1, 8, 8), y), _FashionCNN(relu), loss_func=nn.NLLLoss())
    v = said(mk(True))
    assert v['output_activation']['severity'] == 'warning' and 'ReLU before the `log_softmax`' in v['output_activation']['evidence'], v
    assert "the model's own `forward`, on the output of `fc1`" in v['output_activation']['evidence']   # a ReLU call
    assert 'output_activation' not in said(mk(False))

@pytest.mark.parametrize('name,check,layer,what', [
    ('softmax_over_one_unit', 'constant_output', '4', '`4`, a Softmax over 1 unit'),
    ('sigmoid_output_raw_prices', 'target_range', 'act', '`act`, a Sigmoid'),
    ('relu_on_logits', 'output_activation', '5', '`5`, a ReLU over 10 units'),
    ('softmax_into_cross_entropy', 'output_activation', '12', '`12`, a Softmax over 6 units'),
    ('sigmoid_into_bce_with_logits', 'output_activation', 'out_act', '`out_act`, a Sigmoid'),
])
def test_findings_about_the_output_name_the_module_that_made_it(name, check, layer, what):
    "The bug zoo's output bugs: the verdict named the root; now the module that made the output, with what it is"
    random.seed(0); np.random.seed(0); torch.manual_seed(0)
    v = said(cases()[name].build(False))
    assert (v[check]['layer'], what in v[check]['evidence']) == (layer, True), v[check]

def test_nan_outputs_on_the_first_batch_are_traced():
    "The digits CNN with an Inf weight in its last layer (issue 45, point 8): the `nonfinite` verdict names the module, the operation and the weight"
    learn = digits_learner()
    with torch.no_grad(): learn.model[4].weight[0, 0] = float('inf')
    v = said(learn)['nonfinite']
    assert v['layer'] == '4' and v['op'].startswith('aten::') and '`4`, a Linear with 10 outputs, from `4.weight`' in v['evidence'], v

class _KerasCifar(nn.Module):
    "The network of discuss.pytorch.org/t/what-does-model-eval-do-for-batchnorm-layer/7146 (conv, BatchNorm, pooling, dropout, two dense layers), at the digits' size"
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1, self.conv2, self.bn2 = nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.Conv2d(32, 32, 3), nn.BatchNorm2d(32)
        self.pool, self.drop, self.fc1, self.fc2 = nn.MaxPool2d(2), nn.Dropout(0.25), nn.Linear(32 * 3 * 3, 512), nn.Linear(512, 10)
    def forward(self, x):
        x = self.drop(self.pool(F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))))
        return self.fc2(F.relu(self.fc1(x.flatten(1))))

def test_validation_at_chance_names_the_layers_that_compute_otherwise_in_evaluation():
    """The thread above: "training accuracy is perfect, ... with model.eval() only 10%". The `valid_at_chance` hint blamed
    labels or memorising alone; now it names the model's BatchNorm and Dropout layers, which compute otherwise in evaluation"""
    from fastexplorer.findings import Findings
    tree = _KerasCifar().to_representation().get_dict()
    losses = [2.3 * 0.93 ** i for i in range(60)]                     # the training loss falls to 0.03
    a = next(a for a in Findings(tree).epoch_alerts({}, 3, losses=losses, chance=math.log(10), valid_loss=2.35)
             if a['kind'] == 'valid_at_chance')
    assert all(f"`{p}` ({c})" in a['hint'] for p,c in (('bn1', 'BatchNorm2d'), ('bn2', 'BatchNorm2d'), ('drop', 'Dropout'))), a['hint']

def _vit_run(path, flush_batches, monkeypatch):
    "A seeded timm ViT on the digits (upsampled to 32×32) under SGD at lr 3, every batch sampled: its live alerts"
    import timm, fastexplorer.steps as S
    monkeypatch.setattr(S, 'FLUSH_BATCHES', flush_batches); monkeypatch.setattr(S, 'FLUSH_SECONDS', 0. if flush_batches == 1 else 1e9)
    from fastai.optimizer import SGD
    random.seed(0); np.random.seed(0); torch.manual_seed(0)
    x, y = digits_raw()
    x = F.interpolate((x / 16).view(-1, 1, 8, 8), size=32, mode='bilinear').expand(-1, 3, -1, -1).contiguous()
    model = timm.create_model('vit_tiny_patch16_224', pretrained=False, img_size=32, patch_size=8, depth=2, num_classes=10)
    learn = Learner(tensor_dls(x, y, bs=64), model, loss_func=nn.CrossEntropyLoss(), opt_func=SGD,
                    cbs=ExplorerCallback(path, every=1, preflight=False))
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 3.)
    return [(a['kind'], a.get('stat'), a.get('step'), a['layer']) for a in load_run(path).meta['live_alerts']]

def test_a_seeded_vit_that_diverges_names_the_same_first_finding_on_any_machine(tmp_path, monkeypatch):
    """Issue 45, point 8: a seeded timm ViT at a learning rate far too high named `patch_embed.proj` first in one run and
    `blocks.1.norm1` in another. Two causes: the gradient statistics' norm overflowed (3.4e38) a step before any NaN,
    which used the one trace up on a batch with nothing to find, so the first finding fell to whichever statistics
    came first; and live alerts kept the order the writes found them in, which depends on the machine's speed
    (`StepQueue` writes every ten batches or every second). Now the trace waits for a real NaN and names its operation,
    and the alerts keep the order of the steps: the same list whether the writes come every batch or once"""
    every = _vit_run(tmp_path/'fast', 1, monkeypatch)
    once = _vit_run(tmp_path/'slow', 1000, monkeypatch)
    assert every == once, (every, once)
    assert every[0][:2] == ('nonfinite', 'op'), every     # the traced origin: the module and operation that made the NaN

def test_padding_the_loss_counts_is_named():
    """DALL-E's text loss (lucidrains/DALLE-pytorch#57): captions padded with token 0 to one length, and
    `F.cross_entropy(logits, labels)` without the `ignore_index` the code defined, so the pads count in the loss. No
    statistic of a layer sees it; the batch does. The fix (#58), `ignore_index=0`, and a tagger whose common tag ends many
    rows over words that differ, say nothing."""
    g = torch.Generator().manual_seed(0)
    lens,start = torch.randint(3, 25, (256, 1), generator=g),torch.randint(0, 29, (256, 1), generator=g)
    pos = torch.arange(25)
    seq = torch.where(pos < lens, 1 + (start + pos) % 29, 0)
    dls = tensor_dls(seq[:, :-1], seq[:, 1:], bs=32)
    v = said(Learner(dls, _TinyLM(vocab=30, dim=16), loss_func=nn.CrossEntropyLoss()))
    assert v['padding_in_loss']['severity'] == 'warning' and v['padding_in_loss']['token'] == 0, v
    assert 'ignore_index=0' in v['padding_in_loss']['fix']
    assert 'padding_in_loss' not in said(Learner(dls, _TinyLM(vocab=30, dim=16), loss_func=nn.CrossEntropyLoss(ignore_index=0)))
    tags = torch.where(torch.rand(256, 24, generator=g) < 0.7, 0, torch.randint(1, 5, (256, 24), generator=g))
    words = torch.randint(1, 30, (256, 24), generator=g)
    tagger = Learner(tensor_dls(words, tags, bs=32), _TinyLM(vocab=30, dim=16), loss_func=nn.CrossEntropyLoss())
    assert 'padding_in_loss' not in said(tagger)

class _EncoderLM(nn.Module):
    "A next-token model on `nn.TransformerEncoder`, with the causal mask or without it (the forum's bug)"
    def __init__(self, causal, vocab=30, dim=16):
        super().__init__()
        self.causal,self.emb,self.out = causal,nn.Embedding(vocab, dim),nn.Linear(dim, vocab)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 2, 32, dropout=0., batch_first=True), 1)
    def forward(self, x):
        m = nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if self.causal else None
        return self.out(self.enc(self.emb(x), mask=m)).transpose(1, 2)

def test_a_next_token_model_that_sees_the_future_is_named():
    """"Transformer language model learns too fast, then generates garbage": an `nn.TransformerEncoder` trained on next
    tokens without its causal mask (a recurring PyTorch-forum question) reads the token it must predict; its training
    loss falls to near 0. The preflight's charting backward takes sample 0's output at position 0 only, so its gradient
    at later positions must be zero; the fix, `generate_square_subsequent_mask`, makes it so."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    seq = 1 + (torch.randint(0, 29, (256, 1), generator=g) + torch.arange(17)) % 29
    dls = tensor_dls(seq[:, :-1], seq[:, 1:], bs=32)
    v = said(Learner(dls, _EncoderLM(False), loss_func=nn.CrossEntropyLoss()))
    assert v['future_leak']['severity'] == 'error' and '15 later positions' in v['future_leak']['evidence'], v
    assert v['batch_independence']['severity'] == 'ok'
    assert said(Learner(dls, _EncoderLM(True), loss_func=nn.CrossEntropyLoss()))['future_leak']['severity'] == 'ok'

def test_a_batch_of_one_sample_has_no_spread_to_report():
    """The accepted fix of the zoo's `linear_regression_lr_nan` (a one-weight regression on x from 0 to 199, batches of
    one sample) keeps x unscaled: `input_scale` is true, but one sample has no spread. Before: "spreads up to 0"."""
    v = said(cases()['linear_regression_lr_nan'].build(True))['input_scale']
    assert v['severity'] == 'warning' and 'spreads up to 0' not in v['evidence'], v
    assert 'one sample: no spread to measure' in v['evidence']

def test_a_loss_of_ones_own_that_sums_over_the_batch_is_measured():
    """The JAX docs' MLP (jax-ml/jax#3113, the zoo's `summed_loss_large_batch_explodes`) sums its cross-entropy in a
    function of its own: no `reduction` attribute says so. The halves of the first batch measure it: their losses add
    up to the whole's. The chance level is then read per sample (ln 10 at initialisation, not 256 times it), and the
    sum is said as `info` under SGD; its mean twin is not summed."""
    c = cases()['summed_loss_large_batch_explodes']
    for fixed in (False, True):
        torch.manual_seed(0); random.seed(0)
        v = said(c.build(fixed))
        assert ('loss_summed' in v) == (not fixed), v
        ev = v['loss_contract']['evidence']   # "loss 2.303 at initialisation; ...": per sample, whatever the reduction
        assert v['loss_contract']['severity'] == 'ok' and abs(float(ev.split()[1]) - math.log(10)) < 0.2, v
    torch.manual_seed(0); random.seed(0)
    s = said(c.build(False))['loss_summed']
    assert s['severity'] == 'info' and 'their sum' in s['evidence'] and '256×' in s['evidence'], s
