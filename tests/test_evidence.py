"Findings judged from evidence (issue 45, points 3, 6 and 7): each test a small, faithful port of a real case."
import json, math
import torch, torch.nn.functional as F
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat, MSELossFlat
from fastai.metrics import accuracy
from fastai.optimizer import SGD
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *
from fastexplorer.core import validate
from bugzoo import tensor_dls, digits_raw

def _fit(learn, path, n=2, lr=1e-3, **kw):
    "Train `learn` under the callback (no preflight unless asked): the run's findings"
    with learn.no_bar(), learn.no_logging(): learn.fit(n, lr, cbs=ExplorerCallback(path, **{'preflight': False, **kw}))
    return load_run(path).alerts

def _digits():
    "scikit-learn's digits, normalised, and their labels"
    x,y = digits_raw()
    return (x - x.mean()) / x.std(), y

def _mlp(o=10): return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, o))

def _asks(al): return al[al.severity.isin(['warning', 'error'])]

def _valid_files(path):
    "Every JSON file of the run folder `path` fits its schema (the new kinds of findings included)"
    for f in path.glob('*.json'): validate(json.loads(f.read_text()))

def test_bias_before_batchnorm_is_not_frozen(tmp_path):
    "A conv's bias just before a BatchNorm, under plain SGD: the norm takes off its mean, its gradient is ~1e-8"
    x,y = _digits()
    torch.manual_seed(0)
    def block(i, o): return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
    model = nn.Sequential(block(1, 16), block(16, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    al = _fit(Learner(tensor_dls(x.view(-1, 1, 8, 8), y), model, loss_func=CrossEntropyLossFlat(), opt_func=SGD),
              tmp_path, n=3, lr=1e-2)
    assert 'frozen' not in set(al.kind), al[['kind', 'layer', 'message']]

def test_batchnorm_on_raw_features_excuses_their_scale():
    "fastai's `tabular_learner` on raw features (no `Normalize`): its `bn_cont` BatchNorm1d normalises them"
    from sklearn.datasets import load_breast_cancer
    from fastai.tabular.all import TabularDataLoaders, tabular_learner, Categorify
    df = load_breast_cancer(as_frame=True).frame.rename(columns=lambda c: c.replace(' ', '_'))
    dls = TabularDataLoaders.from_df(df, cont_names=[c for c in df.columns if c != 'target'], y_names='target',
                                     procs=[Categorify], bs=64, valid_idx=list(range(0, len(df), 5)))
    said = lambda bn: {v['check']: v for v in tabular_learner(dls, layers=[64, 32], config={'bn_cont': bn}).preflight()}
    v = said(True)['input_scale']
    assert v['severity'] == 'ok' and '`bn_cont`, a BatchNorm1d' in v['evidence'], v
    assert said(False)['input_scale']['severity'] == 'warning'   # without the norm the features stay in the hundreds

def _valid_scaled(scale, shift):
    "Digits whose validation inputs skipped the training set's normalisation (scaled by `scale`, shifted by `shift`)"
    x,y = digits_raw()
    xn = (x - x.mean()) / x.std()
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0)); n = int(len(x) * 0.2)
    tr = [(xn[j], y[j]) for j in idx[n:].tolist()]
    va = [(x[j] * scale + shift, y[j]) for j in idx[:n].tolist()]
    return DataLoaders(DataLoader(tr, bs=32, shuffle=True, drop_last=True), DataLoader(va, bs=32))

def test_valid_loss_above_chance_with_good_accuracy_is_not_chance(tmp_path):
    "A validation set fed raw pixel bytes: a validation loss many times chance, yet an accuracy far above it"
    torch.manual_seed(0)
    learn = Learner(_valid_scaled(255., 0.), _mlp(), loss_func=CrossEntropyLossFlat(), metrics=accuracy)
    al = _fit(learn, tmp_path, n=4)
    acc = [float(r[2]) for r in learn.recorder.values]
    assert all(a > 0.5 for a in acc) and 'valid_at_chance' not in set(al.kind), (acc, al[['kind', 'message']])

def test_valid_at_chance_by_accuracy_says_how_far_the_loss_is(tmp_path):
    "Validation inputs shifted far off the training set's: accuracy near chance, a loss many times the chance level"
    torch.manual_seed(0)
    learn = Learner(_valid_scaled(1., 50.), _mlp(), loss_func=CrossEntropyLossFlat(), metrics=accuracy)
    al = _fit(learn, tmp_path, n=4)
    v = al[al.kind == 'valid_at_chance']
    assert len(v), (learn.recorder.values, al[['kind', 'message']])
    for m,(_,vl,_) in zip(v.message, [learn.recorder.values[e - 1] for e in v.epoch]):
        assert m.startswith('the validation accuracy is'), m
        if vl > 2 * math.log(10): assert '× the chance level' in m and 'not at it' in m, m   # far above: said so

def test_nan_loss_at_some_steps_is_found(tmp_path):
    "A loss averaged over a batch's positives only: NaN at the batches without one, every activation finite"
    x,y = _digits()
    def positives_loss(o, t): m = t == 0; return F.cross_entropy(o[m], t[m])
    torch.manual_seed(0)
    al = _fit(Learner(tensor_dls(x, y, bs=16), _mlp(), loss_func=positives_loss), tmp_path)
    a = al[al.kind == 'nonfinite_loss']
    assert len(a) and (a.severity == 'error').all() and 'while the activations and gradients' in a.message.iloc[0], al
    _valid_files(tmp_path)

def test_nan_in_the_data_is_named_before_what_it_makes_nan(tmp_path):
    "NaN pixels in every training batch: the outputs, activations and gradients go NaN too, but the data is named first"
    x,y = _digits()
    x[::4, 10:14] = float('nan')   # a few pixels of one image in 4: every batch of 32 holds some
    torch.manual_seed(0)
    al = _asks(_fit(Learner(tensor_dls(x, y), _mlp(), loss_func=CrossEntropyLossFlat()), tmp_path, preflight=True))
    assert al.kind.iloc[0] == 'nonfinite_input' and 'nonfinite' in set(al.kind), al[['kind', 'step', 'message']]
    _valid_files(tmp_path)

def test_nan_in_a_later_batch_is_the_datas(tmp_path):
    """One sample normalised to NaN (fxia22/pointnet.pytorch#58: a degenerate point cloud divided by 0): the batches that
    hold it make every activation NaN, but the data is named, at the step it came, not the first layer"""
    x,y = _digits()
    x[[5, 300, 900]] = float('nan')
    torch.manual_seed(0)
    al = _asks(_fit(Learner(tensor_dls(x, y, bs=16), _mlp(), loss_func=CrossEntropyLossFlat()), tmp_path, every=1))
    assert al.kind.iloc[0] == 'nonfinite_input', al[['kind', 'step', 'message']]
    assert "the data's, not a layer's" in al.message.iloc[0]
    _valid_files(tmp_path)

def test_nan_in_the_validation_targets_is_named(tmp_path):
    """PyPOTS#232: the validation targets keep their missing values as NaN: training is finite, the validation loss is
    NaN at every epoch; the targets are named (`nonfinite_target`). Masked out of the loss, they are no finding"""
    x,y = _digits()
    t,valid = F.one_hot(y, 10).float(),torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[:len(x) // 5]
    t[valid[::7], 3] = float('nan')   # `tensor_dls`' validation split (seed 0, 20%): a missing value in 1 sample of 7
    dls = tensor_dls(x, t, bs=32)
    def masked(o, t): m = torch.isfinite(t); return F.mse_loss(o[m], t[m])
    for loss,want in ((MSELossFlat(), {'nonfinite_target'}), (masked, set())):
        torch.manual_seed(0)
        al = _asks(_fit(Learner(dls, _mlp(), loss_func=loss), tmp_path / str(bool(want))))
        assert set(al.kind) == want, al[['kind', 'step', 'message']]
    _valid_files(tmp_path / 'True')

def test_labels_collapsed_to_one_class(tmp_path):
    "Targets all 0 (a label function that maps every file to one class): the loss falls to 0, nothing is learnt"
    x,y = _digits()
    torch.manual_seed(0)
    al = _fit(Learner(tensor_dls(x, y * 0), _mlp(), loss_func=CrossEntropyLossFlat()), tmp_path)
    assert 'labels_one_class' in set(_asks(al).kind), al[['kind', 'message']]
    _valid_files(tmp_path)
    torch.manual_seed(0)   # the fixed twin: the real labels
    assert 'labels_one_class' not in set(_fit(Learner(tensor_dls(x, y), _mlp(), loss_func=CrossEntropyLossFlat()),
                                              tmp_path/'fixed').kind)

def test_multi_hot_targets_under_a_softmax(tmp_path):
    "Multi-label targets (even, above 4, a seven) given to `nn.CrossEntropyLoss`, which takes them as probabilities"
    x,y = _digits()
    yy = torch.stack([y % 2 == 0, y > 4, y == 7], 1).float()
    torch.manual_seed(0)
    al = _fit(Learner(tensor_dls(x, yy), _mlp(3), loss_func=nn.CrossEntropyLoss()), tmp_path)
    assert 'multi_hot_softmax' in set(_asks(al).kind), al[['kind', 'message']]
    _valid_files(tmp_path)
    torch.manual_seed(0)   # the fixed twin: a sigmoid per class
    from fastai.losses import BCEWithLogitsLossFlat
    assert 'multi_hot_softmax' not in set(_fit(Learner(tensor_dls(x, yy), _mlp(3), loss_func=BCEWithLogitsLossFlat()),
                                               tmp_path/'fixed').kind)

def test_loss_three_times_chance_at_init_is_said():
    """A head initialised with `nn.init.normal_` (std 1, as in a Keras port): the loss starts above 3 ln C. Random
    heads of healthy models start so too (torchvision's EfficientNet at 3.3 ln 10): the verdict stays `ok`, but says
    how far above ln C the loss starts instead of a bare `fits`"""
    x,y = _digits()
    torch.manual_seed(0)
    m = _mlp(); nn.init.normal_(m[2].weight)
    v = {v['check']: v for v in Learner(tensor_dls(x, y), m, loss_func=CrossEntropyLossFlat()).preflight()}
    c = v.get('loss_contract') or v['loss_at_init']
    assert "× ln 10" in c['evidence'], c

def test_flat_regression_loss_names_the_targets_scale(tmp_path):
    "House prices in dollars under MSE: the loss stays near 1e11 the whole run; the hint says the targets' scale"
    torch.manual_seed(0)
    x = torch.randn(1024, 8); y = (x @ torch.randn(8, 1)) * 5e4 + 3e5
    al = _fit(Learner(tensor_dls(x, y), nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)),
                      loss_func=MSELossFlat()), tmp_path, n=3)
    a = al[al.kind == 'loss_stalled']
    assert len(a), al[['kind', 'message']]
    assert a.hint.iloc[-1].startswith('the targets are of the order of'), a.hint.iloc[-1]
    assert 'at the chance level' not in a.message.iloc[-1], a.message.iloc[-1]   # it is 2 or 3 times chance

def test_dead_units_in_a_run_that_learns_are_info(tmp_path):
    """Dark digits on a bright page (inputs far from zero, all non-negative): most of a ReLU layer is never positive,
    yet a second `fit` of the model, already at 0.9 accuracy, learns: the dead units are capacity lost, not a failure"""
    x,y = digits_raw()
    inv = 16 - F.interpolate(x.view(-1, 1, 8, 8), size=24, mode='bilinear').view(len(x), -1)
    torch.manual_seed(0)
    learn = Learner(tensor_dls(inv, y), nn.Sequential(nn.Linear(576, 128), nn.ReLU(), nn.Linear(128, 10)),
                    loss_func=nn.CrossEntropyLoss(), metrics=accuracy)
    with learn.no_bar(), learn.no_logging(): learn.fit(3, 1e-3)
    al = _fit(learn, tmp_path, n=3)
    acc = [float(r[2]) for r in learn.recorder.values]
    dead = al[al.kind == 'dead']
    assert min(acc) > 0.8 and len(dead), (acc, al)   # the case as reported: dead units, a run at 0.8 or more
    assert (dead.severity == 'info').all(), dead[['epoch', 'severity', 'message']]

def test_squeeze_excitation_gates_in_a_run_that_learns_are_info(tmp_path):
    "torchvision's `SqueezeExcitation` blocks in a CNN at 0.9 accuracy: their ReLU and sigmoid gate ask nothing"
    from torchvision.ops import SqueezeExcitation
    x,y = _digits()
    torch.manual_seed(0)
    def block(i, o): return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(),
                                          SqueezeExcitation(o, o // 4))
    model = nn.Sequential(block(1, 32), block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    learn = Learner(tensor_dls(x.view(-1, 1, 8, 8), y), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy)
    with learn.no_bar(), learn.no_logging():
        learn.fit_one_cycle(3, 1e-2, cbs=ExplorerCallback(tmp_path, preflight=False))
    al = load_run(tmp_path).alerts
    assert float(learn.recorder.values[-1][2]) > 0.85, learn.recorder.values
    assert not len(_asks(al)), al[['epoch', 'kind', 'layer', 'message']]

def test_validation_set_preprocessed_otherwise(tmp_path):
    """JeasunLok/ResNet-pytorch#1: the training images are standardised, the validation images left at `ToTensor`'s 0..1;
    training looks healthy, validation stays at chance. The inputs' histograms differ: `valid_input_shift` is named first.
    Standardised alike (the fix), nothing is said"""
    from bugs_data import _digit_images, _split, _dls, _small_cnn
    x,y = _digit_images()
    xt,yt,xv,yv = _split(x, y)
    m,s = xt.mean(),xt.std()
    for fixed in (False, True):
        torch.manual_seed(0)
        learn = Learner(_dls((xt - m) / s, yt, (xv - m) / s if fixed else xv, yv), _small_cnn(bn=True),
                        loss_func=nn.CrossEntropyLoss(), metrics=accuracy)
        al = _asks(_fit(learn, tmp_path / str(fixed), n=3, lr=3e-3))
        if fixed: assert al.empty, al[['kind', 'message']]
        else: assert al.kind.iloc[0] == 'valid_input_shift', al[['kind', 'step', 'message']]
    _valid_files(tmp_path / 'False')

def test_augmented_training_images_are_no_shift(tmp_path):
    """fastai's vision pipeline: `aug_transforms` (warps, zooms, lighting) on the training batches only, `Normalize` on
    both. The histograms are measured and stay alike: no `valid_input_shift`"""
    from PIL import Image
    from fastai.vision.all import ImageDataLoaders, Resize, aug_transforms, Normalize, imagenet_stats, vision_learner
    from fastai.vision.all import resnet18
    x,y = digits_raw()
    fns = []
    for i in range(240):
        f = tmp_path / f"{i}.png"
        Image.fromarray((x[i].view(8, 8) * 15).byte().numpy()).convert('RGB').resize((32, 32)).save(f); fns.append(f)
    dls = ImageDataLoaders.from_lists(tmp_path, fns, [str(int(v)) for v in y[:240]], valid_pct=0.25, seed=0, bs=32,
                                      item_tfms=Resize(32), batch_tfms=[*aug_transforms(size=32, min_scale=0.75),
                                                                        Normalize.from_stats(*imagenet_stats)])
    torch.manual_seed(0)
    learn = vision_learner(dls, resnet18, pretrained=False, metrics=accuracy)
    cb = ExplorerCallback(tmp_path / 'run', every=1, preflight=False)
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-3, cbs=cb)
    assert cb.watch.shift.range is not None and cb.watch.shift.train is not None   # measured
    al = load_run(tmp_path / 'run').alerts
    assert 'valid_input_shift' not in set(al.kind), al[['kind', 'message']]
