"""Issue 45: checks of the model's structure as one forward runs it (`fastexplorer.lint`), and a normalisation as a
regression's output (`contract.check_output_activation`); each from a real small case, through `Learner.preflight`."""
import pytest, torch
from torch import nn
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat, MSELossFlat
from fastexplorer.all import *
from fastexplorer.preflight import *   # `Learner.preflight`
from bugzoo import tensor_dls, digits_raw, cases

def said(learn)->dict:
    "The preflight's verdicts on `learn`, by check (the last of each)"
    torch.manual_seed(0)
    return {v['check']: v for v in learn.preflight()}

def _digits(model)->Learner:
    x, y = digits_raw()
    return Learner(tensor_dls(x / 16, y, bs=64), model, loss_func=CrossEntropyLossFlat())

def test_a_stack_of_linear_layers_is_named_as_one_linear_map():
    """An MLP on scikit-learn's digits written `nn.Sequential(Linear, Linear, Linear)`, the activations forgotten: a
    linear model whatever its depth (UMLAUT's and Karpathy's first checks: the model's structure). Named at its first
    Linear, with the chain; the same MLP with ReLUs, or with a functional `torch.tanh` between, raises nothing."""
    v = said(_digits(nn.Sequential(nn.Linear(64, 128), nn.Linear(128, 64), nn.Linear(64, 10))))
    assert v['linear_stack']['severity'] == 'warning', v
    assert (v['linear_stack']['layer'], v['linear_stack']['layers']) == ('0', ['0', '1', '2'])
    assert '64 → 10' in v['linear_stack']['evidence']
    assert 'linear_stack' not in said(_digits(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                                             nn.Linear(64, 10))))
    class Tanh(nn.Module):   # the activation as a function in `forward`: no module shows it
        def __init__(self): super().__init__(); self.a,self.b = nn.Linear(64, 128),nn.Linear(128, 10)
        def forward(self, x): return self.b(torch.tanh(self.a(x)))
    assert 'linear_stack' not in said(_digits(Tanh()))

def test_a_low_rank_factorisation_is_not_a_linear_stack():
    "A bottleneck narrower than the input and the output (a low-rank linear model, a linear autoencoder) is on purpose"
    assert 'linear_stack' not in said(_digits(nn.Sequential(nn.Linear(64, 4), nn.Linear(4, 10))))

def test_a_batchnorm_after_a_dropout_is_named_with_its_variance_shift():
    """mlcolvar's feed-forward blocks ran `Linear → ReLU → Dropout → BatchNorm` (luigibonati/mlcolvar#267, the zoo's
    `batchnorm_after_dropout`): the norm learns its variance on the dropout's noise. Named at the norm, with the shift
    measured on the batch (at least 1/(1-p) = 1.25); its fix, `Linear → BatchNorm → ReLU → Dropout`, raises nothing."""
    c = cases()['batchnorm_after_dropout']
    v = said(c.build(False))['norm_placement']
    assert (v['severity'], v['layer'], v['dropout']) == ('warning', 'nn.3', 'nn.2'), v
    assert v['shift'] > 1.1 and 'p=0.2' in v['evidence']
    assert 'norm_placement' not in said(c.build(True))

@pytest.mark.parametrize('lin_first', [True, False])
def test_fastai_tabular_blocks_are_not_a_misplaced_norm(lin_first):
    "fastai's tabular model: `Linear → ReLU → BatchNorm → Dropout`, or `BatchNorm → Dropout → Linear → ReLU`; and no stack"
    from fastai.tabular.all import tabular_learner, tabular_config
    dls = cases()['diabetes_regression'].build(True).dls
    learn = tabular_learner(dls, layers=[64, 32], y_range=(0, 4),
                            config=tabular_config(ps=[0.2, 0.2], embed_p=0.1, lin_first=lin_first))
    v = said(learn)
    assert 'norm_placement' not in v and 'linear_stack' not in v, v

def _diabetes():
    from sklearn.datasets import load_diabetes
    x, y = load_diabetes(return_X_y=True)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0), ((y - y.mean()) / y.std()).unsqueeze(1)

@pytest.mark.parametrize('norm', [nn.BatchNorm1d(1), nn.LayerNorm(1)])
def test_a_normalisation_as_a_regression_output_is_named(norm):
    """A regression MLP on scikit-learn's diabetes table whose last layer is a normalisation (the TensorFlow forum's
    "Applying Batch Normalization on the output layer in a regression problem": predictions 5× worse): it sets each
    batch's outputs' mean and spread (a LayerNorm over one output: a constant) whatever the input. Named at the norm;
    the MLP without it raises nothing."""
    x, y = _diabetes()
    body = [nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)]
    v = said(Learner(tensor_dls(x, y, bs=64), nn.Sequential(*body, norm), loss_func=MSELossFlat()))['output_activation']
    assert (v['severity'], v['layer']) == ('warning', '3'), v
    assert f"`3`, a {type(norm).__name__}" in v['evidence']
    assert 'output_activation' not in said(Learner(tensor_dls(x, y, bs=64), nn.Sequential(*body), loss_func=MSELossFlat()))

def test_word_vectors_averaged_into_linear_layers_are_not_a_linear_stack():
    """fastText as a text-classification repository writes it (the zoo's `softmax_into_nll_loss`, fixed): frozen word vectors
    averaged, `fc1` (300→10), `fc2` (10→4), a log-softmax; a linear model by design (a rank-constrained linear classifier)"""
    assert 'linear_stack' not in said(cases()['softmax_into_nll_loss'].build(True))
