"`learn.preflight()` on real learners (random weights): nothing to act on for healthy ones, the model untouched, and the real bugs it is for (issue 32)."
import pytest, torch
import torch.nn.functional as F
from torch import nn
from fastai.learner import Learner
from fastexplorer.all import *
from fastexplorer.preflight import *   # `Learner.preflight`
from untouched import Untouched
from test_alerts import HEALTHY

@pytest.mark.parametrize('name', HEALTHY)
def test_preflight_is_quiet_on_healthy_learners_and_leaves_them_untouched(name):
    "torchvision, timm, Hugging Face and fastai learners: no warning or error, every check run or said why not; the model, its gradients and the random state as they were"
    torch.manual_seed(0)
    learn = HEALTHY[name]()
    u,grads = Untouched(learn.model),[p.grad for p in learn.model.parameters()]
    v = learn.preflight()
    u.check()
    assert all(p.grad is g for p,g in zip(learn.model.parameters(), grads)), 'gradients replaced'
    assert [(x['check'], x['evidence']) for x in v if x['severity'] in ('warning', 'error')] == [], v
    assert {x['check'] for x in v} >= {'input_scale', 'constant_output', 'batch_independence'}, v

def test_pixels_from_0_to_255_are_named():
    """Images fed as 0..255 floats. Source: "Why are my training results poor when I don't normalise?", a common question;
    fastai's `Normalize` is the fix"""
    torch.manual_seed(0)
    dls = digits_dls()
    learn = Learner(dls, digits_cnn(), loss_func=nn.CrossEntropyLoss())
    x,y = dls.one_batch()
    v = learn.preflight((x * 40 + 120, y))
    assert [x['check'] for x in v if x['severity'] == 'warning'] == ['input_scale'], v

def test_a_view_that_mixes_samples_is_named():
    "A `view` that flattens with the batch dimension in the wrong place (Karpathy's recipe: charting dependencies with backprop)"
    class Flip(nn.Module):
        def forward(self, x): return x.reshape(64, -1).t().reshape(x.shape[0], -1)   # mixes the samples of a batch of 64
    learn = Learner(digits_dls(bs=64), nn.Sequential(Flip(), nn.Linear(64, 10)), loss_func=nn.CrossEntropyLoss())
    v = {x['check']: x['severity'] for x in learn.preflight()}
    assert v['batch_independence'] == 'error', v

def test_the_callback_runs_preflight_first_when_asked(tmp_path):
    "`ExplorerCallback(preflight=True)`: the verdicts in `run.json`, the errors first among `load_run(path).alerts`, the fit unharmed"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1), nn.Softmax(dim=1))
    learn = Learner(digits_dls(), model, loss_func=lambda out, y: F.binary_cross_entropy(out.squeeze(1), (y > 4).float()),
                    cbs=ExplorerCallback(tmp_path/'run', every=5, preflight=True))
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    run = load_run(tmp_path/'run')
    assert {v['check'] for v in run.meta['preflight']} >= {'input_scale', 'constant_output', 'gradient_flow', 'batch_independence'}
    al = run.alerts
    assert list(al.source[:2]) == ['preflight'] * 2 and list(al.kind[:2]) == ['constant_output', 'gradient_flow'], al[['source', 'kind']]
    assert set(al.severity[:2]) == {'error'} and run.meta['status'] == 'finished'

def test_nan_outputs_are_not_called_batch_dependence():
    "Outputs NaN or Inf on the first batch (issue 45): reported as such, not as a batch-dependent model (NaN ≠ NaN)"
    learn = digits_learner()
    with torch.no_grad(): learn.model[4].weight[0, 0] = float('inf')   # the last layer: every output NaN or Inf
    v = {x['check']: x['severity'] for x in learn.preflight()}
    assert (v['nonfinite'], v['batch_independence']) == ('error', 'skipped'), v

def test_a_module_called_twice_is_named_by_its_call_sites():
    """Issue 46: a torchvision resnet18's BasicBlock calls its ReLU twice, and fastai's `tabular_learner` shares one ReLU
    between its layers; the preflight listed "`0.4.0.relu`, `0.4.0.relu`". Each call is a site: `path`, then `path#2`"""
    import healthy
    torch.manual_seed(0)
    for learn,want in ((healthy.vision_resnet(False), ['0.2', '0.4.0.relu', '0.4.0.relu#2']),
                       (healthy.tabular(False), ['layers.0.1', 'layers.0.1#2'])):
        v = next(x for x in learn.preflight() if x['check'] == 'input_saturation')
        assert v['evidence'] == f"the first activations are not saturated ({', '.join(f'`{p}`' for p in want)})", v

def test_a_tables_unscaled_columns_are_named_as_fastai_names_them():
    """Issue 46: scikit-learn's breast cancer table without `Normalize` read "input 1: channel means up to 859", an image's
    word. fastai calls the input `x_cont` and its `DataLoaders` know the columns: `worst_area` (≥ `mean_area` in each
    row, by its definition) has the largest mean. With `bn_cont` the warning is excused, the words the same"""
    from sklearn.datasets import load_breast_cancer
    from fastai.tabular.all import TabularDataLoaders, tabular_learner, tabular_config, Categorify
    df = load_breast_cancer(as_frame=True).frame.rename(columns=lambda c: c.replace(' ', '_'))
    df['target'] = df['target'].map({0: 'malignant', 1: 'benign'})
    dls = TabularDataLoaders.from_df(df, cont_names=list(df.columns[:-1]), y_names='target', procs=[Categorify], bs=16,
                                     valid_idx=list(range(0, len(df), 5)))
    for cfg,sev in (({}, 'ok'), (dict(config=tabular_config(bn_cont=False)), 'warning')):
        torch.manual_seed(0)
        v = next(x for x in tabular_learner(dls, layers=[64, 32], **cfg).preflight() if x['check'] == 'input_scale')
        assert v['severity'] == sev and 'channel' not in v['evidence'], v
        assert v['evidence'].startswith("input 1, `x_cont`, the table's continuous columns: means up to "), v
        assert 'in size (`worst_area`)' in v['evidence'], v
    dls = digits_dls()   # images keep their channels
    x,y = dls.one_batch()
    v = Learner(dls, digits_cnn(), loss_func=nn.CrossEntropyLoss()).preflight((x * 40 + 120, y))
    assert next(x for x in v if x['check'] == 'input_scale')['evidence'].startswith('input 0: channel means'), v
