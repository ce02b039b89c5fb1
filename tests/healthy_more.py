"""Bug zoo: more healthy runs (issue 45), each a real fastai set-up trained the standard way on data built here (no
downloads): scikit-learn's digits written as PNG files and read back by fastai's data blocks, synthetic masks, scikit-learn
tables, synthetic token data. Vision (torchvision and timm models with random weights: resnet18, GoogLeNet, mobilenet_v3
with its squeeze-excitation blocks, efficientnet, convnext and vit in tiny configurations, a U-Net, a DeepLabv3 through
fastai's `TensorImage`/`TensorMask`), tabular, text and language models (AWD-LSTM, tiny BERT and GPT-2 behind an
`after_pred` callback taking `.logits`), collaborative filtering; `fine_tune`, one-cycle, flat-cos, slow starts, short
budgets, SGD and Adam, mixed precision. Each runs 50 training batches or more, in seconds on one CPU core, and learns (its
last losses at most 0.9× its first). Every finding above `info` on them is a false alarm. See `bugzoo.py`.
(`tests/zoo.py`'s resnet50 is left out: 50 batches of it take 20 s on a CPU core, and it does not learn in them.)"""
import atexit, functools, shutil, tempfile
from pathlib import Path
import numpy as np, pandas as pd
from bugzoo import *
from fastai.callback.fp16 import MixedPrecision, AMPMode
from fastai.losses import CrossEntropyLossFlat, BCEWithLogitsLossFlat, MSELossFlat
from fastai.metrics import accuracy
from fastai.optimizer import SGD, Adam

_ROOT = Path(tempfile.mkdtemp(prefix='fastexplorer-healthy-'))
atexit.register(shutil.rmtree, _ROOT, True)
_NW = dict(num_workers=0)   # one process: the data are tiny, and workers cost more than they save here

@functools.cache
def digits_folder(n:int=600)->Path:
    "The first `n` of scikit-learn's digits as 8×8 grey PNG files in a folder per class (`digits/3/17.png`)"
    from PIL import Image
    x,y = digits_raw()
    p = _ROOT/'digits'
    for i in range(n):
        (p/str(int(y[i]))).mkdir(parents=True, exist_ok=True)
        Image.fromarray((x[i].view(8, 8).numpy() * 255 / 16).astype(np.uint8)).save(p/str(int(y[i]))/f'{i}.png')
    return p

def digits_image_dls(size:int=16, bs:int=16, **kw):
    "fastai's `ImageDataLoaders.from_folder` over `digits_folder`, resized to `size`, 20% held out"
    from fastai.vision.all import ImageDataLoaders, Resize
    return ImageDataLoaders.from_folder(digits_folder(), valid_pct=0.2, seed=0, item_tfms=Resize(size), bs=bs, **_NW, **kw)

@functools.cache
def shapes_folder(n:int=160, size:int=16)->Path:
    "`n` noisy grey images with a bright disc at a random place and size, and their masks (1 in the disc), as PNG files"
    from PIL import Image
    rng = np.random.default_rng(0)
    p = _ROOT/f'shapes{size}'
    (p/'images').mkdir(parents=True, exist_ok=True); (p/'masks').mkdir(exist_ok=True)
    yy,xx = np.mgrid[:size, :size]
    for i in range(n):
        cy,cx,r = rng.uniform(size / 4, size * 3 / 4, 2).tolist() + [rng.uniform(size / 8, size / 3.5)]
        m = ((yy - cy) ** 2 + (xx - cx) ** 2 <= r * r).astype(np.uint8)
        img = np.clip(60 + 120 * m + rng.normal(0, 25, m.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(p/'images'/f'{i}.png'); Image.fromarray(m).save(p/'masks'/f'{i}.png')
    return p

def _mask_of(f): return f.parent.parent/'masks'/f.name

class HFLogits(Callback):
    "Hugging Face models return a `ModelOutput`: hand fastai's loss its `logits`, as the fastai+transformers tutorials do"
    def after_pred(self): self.learn.pred = self.pred.logits

class SegOut(Callback):
    "torchvision's segmentation models return `{'out': …}`: hand fastai's loss the `out`"
    def after_pred(self): self.learn.pred = self.pred['out']

class CPUMixedPrecision(MixedPrecision):
    "fastai's `MixedPrecision`, autocasting on the CPU where there is no GPU (fastai's names CUDA's autocast and scaler)"
    def before_fit(self):
        super().before_fit()
        if not torch.cuda.is_available():
            dt = torch.bfloat16 if self.amp_mode == AMPMode.BF16 else torch.float16
            self.autocast,self.learn.scaler = torch.autocast('cpu', dtype=dt),torch.amp.GradScaler('cpu', **self.kwargs)

def mixed(learn, mode='bf16'):
    "`learn.to_bf16()` (or `to_fp16()`), on the CPU too"
    return learn.add_cb(CPUMixedPrecision(amp_mode=AMPMode(mode)))

# ---- vision: fastai's data blocks over digits written as PNG files ----
# the heavier vision models are sampled as `ExplorerCallback` samples by default, one batch in 10 (the loss: every batch)
@healthy(epochs=1, lr=2e-3, fit='fine_tune', fit_kw={'freeze_epochs': 1}, every=10)
def digits_resnet18_fine_tune(fixed):
    "`vision_learner` with a torchvision resnet18 (random weights) on digit PNGs, `fine_tune`d as fastai's first lesson does"
    from fastai.vision.all import vision_learner, resnet18
    return vision_learner(digits_image_dls(), resnet18, pretrained=False, metrics=accuracy)

@healthy(epochs=2, lr=3e-3, fit='fit_one_cycle', every=10)
def digits_googlenet(fixed):
    "torchvision's GoogLeNet (inception blocks, random weights, no auxiliary heads) on digit PNGs through a `DataBlock`"
    import torchvision
    from fastai.vision.all import DataBlock, ImageBlock, CategoryBlock, get_image_files, parent_label, RandomSplitter, Resize
    dls = DataBlock((ImageBlock, CategoryBlock), get_items=get_image_files, get_y=parent_label,
                    splitter=RandomSplitter(0.2, seed=0), item_tfms=Resize(32)).dataloaders(digits_folder(), bs=16, **_NW)
    m = torchvision.models.googlenet(num_classes=10, aux_logits=False, init_weights=True)
    return Learner(dls, m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle', every=10)
def digits_mobilenet_v3(fixed):
    "timm's mobilenetv3_small_050 (squeeze-excitation blocks, hard-swish; random weights) by name through `vision_learner`"
    from fastai.vision.all import vision_learner
    return vision_learner(digits_image_dls(), 'mobilenetv3_small_050', pretrained=False, metrics=accuracy)

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle', every=10)
def digits_efficientnet(fixed):
    """torchvision's EfficientNet (squeeze-excitation, SiLU, stochastic depth; random weights), b0's table at half width and
    depth, on digits upsampled to 64 pixels (its five stride-2 stages leave 2×2), one-cycle: validation accuracy 0.8 in 3
    epochs (at 32 pixels and 2 epochs it ended near chance, 0.15, and its loss's course depended on the thread count)"""
    from torchvision.models.efficientnet import EfficientNet, MBConvConfig
    c = partial(MBConvConfig, width_mult=0.5, depth_mult=0.5)
    b0 = [c(1, 3, 1, 32, 16, 1), c(6, 3, 2, 16, 24, 2), c(6, 5, 2, 24, 40, 2), c(6, 3, 2, 40, 80, 3), c(6, 5, 1, 80, 112, 3),
          c(6, 5, 2, 112, 192, 4), c(6, 3, 1, 192, 320, 1)]
    m = EfficientNet(b0, dropout=0.2, num_classes=10)
    return Learner(digits_image_dls(size=64), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=3, lr=2e-3, fit='fit_one_cycle')
def digits_convnext(fixed):
    "A timm ConvNeXt in a tiny configuration (LayerNorm, GELU, layer scale; random weights), AdamW one-cycle"
    import timm
    m = timm.create_model('convnext_atto', pretrained=False, num_classes=10, depths=(1, 1, 2, 1), dims=(16, 32, 64, 128))
    return Learner(digits_image_dls(size=32), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=4, lr=3e-3, fit='fit_one_cycle')
def digits_vit(fixed):
    "A timm ViT in a tiny configuration (4×4 patches of 16×16 digits, 2 blocks; random weights), one-cycle: it learns slowly"
    import timm
    from fastai.vision.all import Normalize
    m = timm.create_model('vit_tiny_patch16_224', pretrained=False, num_classes=10, img_size=16, patch_size=4,
                          embed_dim=64, depth=2, num_heads=4)
    return Learner(digits_image_dls(batch_tfms=Normalize()), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=3, lr=5e-2, fit='fit')
def digits_cnn_sgd(fixed):
    "A plain CNN (conv, BatchNorm, ReLU) under SGD with momentum at a constant 0.05, through a `DataBlock`"
    from fastai.vision.all import DataBlock, ImageBlock, CategoryBlock, get_image_files, parent_label, RandomSplitter, Resize
    dls = DataBlock((ImageBlock, CategoryBlock), get_items=get_image_files, get_y=parent_label,
                    splitter=RandomSplitter(0.2, seed=0), item_tfms=Resize(16)).dataloaders(digits_folder(), bs=16, **_NW)
    def block(i, o): return nn.Sequential(nn.Conv2d(i, o, 3, stride=2, padding=1), nn.BatchNorm2d(o), nn.ReLU())
    m = nn.Sequential(block(3, 16), block(16, 32), block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    return Learner(dls, m, loss_func=CrossEntropyLossFlat(), opt_func=SGD, metrics=accuracy)

@healthy(epochs=2, lr=1e-2, fit='fit_one_cycle', every=10)
def digits_resnet18_bf16(fixed):
    """`tests/zoo.py`'s torchvision resnet18 (random weights) in bfloat16 mixed precision (`to_bf16`), one-cycle, on digits at
    20 pixels. At 16, `layer4.0.conv1` (stride 2) gets a 1×1 input, where PyTorch 2.14's CPU bfloat16 weight gradient
    reads uninitialised memory: NaN or 1e35 in the taps that see only padding, from one call to the next (the same tensors
    replayed through `aten.convolution_backward`; float32 gives 0). fastexplorer's `nonfinite` was true there, on CI's CPU"""
    import torchvision
    return mixed(Learner(digits_image_dls(size=20), torchvision.models.resnet18(num_classes=10),
                         loss_func=CrossEntropyLossFlat(), metrics=accuracy))

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle')
def digits_cnn_fp16(fixed):
    "A plain CNN in float16 mixed precision (`to_fp16`: autocast and fastai's dynamic loss scaling), one-cycle"
    def block(i, o): return nn.Sequential(nn.Conv2d(i, o, 3, stride=2, padding=1), nn.BatchNorm2d(o), nn.ReLU())
    m = nn.Sequential(block(3, 16), block(16, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return mixed(Learner(digits_image_dls(), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy), 'fp16')

@healthy(epochs=2, lr=1e-2, fit='fit_one_cycle', every=10)
def digits_multilabel(fixed):
    "Multi-label digits (`MultiCategoryBlock`: the digit, and `even` or `odd`) under `BCEWithLogitsLossFlat`, resnet18 body"
    from fastai.vision.all import (DataBlock, ImageBlock, MultiCategoryBlock, get_image_files, RandomSplitter, Resize,
                                   vision_learner, resnet18, accuracy_multi)
    def labels(f): return [f.parent.name, 'even' if int(f.parent.name) % 2 == 0 else 'odd']
    dls = DataBlock((ImageBlock, MultiCategoryBlock), get_items=get_image_files, get_y=labels,
                    splitter=RandomSplitter(0.2, seed=0), item_tfms=Resize(16)).dataloaders(digits_folder(), bs=16, **_NW)
    return vision_learner(dls, resnet18, pretrained=False, metrics=accuracy_multi)

@healthy(epochs=4, lr=3e-3, fit='fit_one_cycle')
def digits_autoencoder(fixed):
    "A convolutional autoencoder reconstructing digit images (`ImageBlock` to `ImageBlock`) under MSE"
    from fastai.vision.all import DataBlock, ImageBlock, get_image_files, RandomSplitter, Resize
    dls = DataBlock((ImageBlock, ImageBlock), get_items=get_image_files, splitter=RandomSplitter(0.2, seed=0),
                    item_tfms=Resize(16)).dataloaders(digits_folder(), bs=16, **_NW)
    m = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 3, stride=2, padding=1), nn.ReLU(),
                      nn.ConvTranspose2d(8, 16, 2, stride=2), nn.ReLU(), nn.ConvTranspose2d(16, 3, 2, stride=2), nn.Sigmoid())
    return Learner(dls, m, loss_func=MSELossFlat())

# ---- segmentation: synthetic discs and their masks ----
@healthy(epochs=2, lr=1e-3, fit='fit_one_cycle', every=10)
def shapes_unet(fixed):
    """`unet_learner` (as `tests/zoo.py`'s) via `SegmentationDataLoaders` on disc masks; its body fastai's xresnet18 at a
    quarter of its width (random weights): on a resnet18 body, Adam's steps over its 31M parameters take 0.45 s a batch"""
    from fastai.vision.all import SegmentationDataLoaders, unet_learner, xresnet18, get_image_files
    p = shapes_folder()
    dls = SegmentationDataLoaders.from_label_func(p, get_image_files(p/'images'), _mask_of, codes=['back', 'disc'], bs=4,
                                                  valid_pct=0.2, seed=0, **_NW)
    return unet_learner(dls, partial(xresnet18, widen=0.25), pretrained=False)

@healthy(epochs=2, lr=2e-2, fit='fit_one_cycle', every=10)
def shapes_deeplabv3(fixed):
    """torchvision's DeepLabv3 (mobilenet_v3 backbone, random weights) through a `DataBlock` of `TensorImage` and `TensorMask`,
    under SGD with momentum as torchvision's segmentation reference trains it"""
    import torchvision
    from fastai.vision.all import DataBlock, ImageBlock, MaskBlock, get_image_files, RandomSplitter
    dls = DataBlock((ImageBlock, MaskBlock(['back', 'disc'])), get_items=get_image_files, get_y=_mask_of,
                    splitter=RandomSplitter(0.2, seed=0)).dataloaders(shapes_folder(128, 32)/'images', bs=4, **_NW)
    m = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=2)
    return Learner(dls, m, loss_func=CrossEntropyLossFlat(axis=1), opt_func=partial(SGD, mom=0.9, wd=1e-4), cbs=SegOut())

# ---- tabular: scikit-learn tables through `TabularDataLoaders` ----
def _tabular(df, cats, conts, y, bs=16, **kw):
    from fastai.tabular.all import TabularDataLoaders, Categorify, FillMissing, Normalize
    return TabularDataLoaders.from_df(df, cat_names=cats, cont_names=conts, y_names=y, procs=[Categorify, FillMissing, Normalize],
                                      bs=bs, valid_idx=list(range(0, len(df), 5)), **_NW, **kw)

@healthy(epochs=5, lr=1e-2, fit='fit_one_cycle')
def diabetes_regression(fixed):
    "`tabular_learner` regression on scikit-learn's diabetes table: `sex` and binned age categorical, the rest continuous, `y_range`"
    from sklearn.datasets import load_diabetes
    from fastai.tabular.all import tabular_learner, RegressionBlock
    d = load_diabetes(as_frame=True, scaled=False).frame
    d['sex'] = d['sex'].map({1.: 'a', 2.: 'b'}); d['decade'] = (d['age'] // 10).astype(int).astype(str)
    d['target'] = (d['target'] / 100).astype('float32')
    dls = _tabular(d, ['sex', 'decade'], ['age', 'bmi', 'bp', 's1', 's2', 's3', 's4', 's5', 's6'], 'target',
                   y_block=RegressionBlock())
    return tabular_learner(dls, layers=[64, 32], y_range=(0, 4))

@healthy(epochs=5, lr=1e-2, fit='fit_one_cycle')
def wine_classification(fixed):
    "`tabular_learner` classification on scikit-learn's wine table (3 classes), one feature also binned as a category"
    from sklearn.datasets import load_wine
    from fastai.tabular.all import tabular_learner
    d = load_wine(as_frame=True).frame
    conts = [c for c in d.columns if c != 'target']
    d['hue_bin'] = pd.qcut(d['hue'], 4, labels=['q1', 'q2', 'q3', 'q4']).astype(str); d['target'] = d['target'].astype(str)
    return tabular_learner(_tabular(d, ['hue_bin'], conts, 'target', bs=8), layers=[32, 16], metrics=accuracy)

@healthy(epochs=3, lr=5e-2, fit='fit')
def cancer_tabular_sgd(fixed):
    "`tabular_learner` on scikit-learn's breast cancer table under SGD with momentum at a constant 0.05"
    from sklearn.datasets import load_breast_cancer
    from fastai.tabular.all import tabular_learner
    d = load_breast_cancer(as_frame=True).frame.rename(columns=lambda c: c.replace(' ', '_'))
    d['target'] = d['target'].map({0: 'malignant', 1: 'benign'})
    return tabular_learner(_tabular(d, [], [c for c in d.columns if c != 'target'], 'target', bs=16), layers=[64, 32],
                           opt_func=SGD, metrics=accuracy)

@healthy(epochs=2, lr=1e-2, fit='fit_one_cycle')
def synthetic_mixed_table(fixed):
    "`tabular_learner` on a table of three categorical and three continuous columns (missing values filled), two classes"
    from fastai.tabular.all import tabular_learner
    rng = np.random.default_rng(0)
    n = 1200
    d = pd.DataFrame({'city': rng.choice(list('abcdefgh'), n), 'plan': rng.choice(['free', 'pro', 'team'], n),
                      'day': rng.choice(['mon', 'tue', 'wed', 'thu', 'fri'], n), 'age': rng.normal(40, 12, n),
                      'visits': rng.poisson(5, n).astype(float), 'spend': rng.lognormal(3, 1, n)})
    s = (d.plan == 'pro') * 1.5 + (d.city < 'd') - (d.age - 40) / 12 + np.log(d.spend) - 3 + rng.normal(0, 0.5, n)
    d.loc[rng.random(n) < 0.05, 'age'] = np.nan
    d['churn'] = np.where(s > 0.5, 'yes', 'no')
    return tabular_learner(_tabular(d, ['city', 'plan', 'day'], ['age', 'visits', 'spend'], 'churn', bs=32), metrics=accuracy)

# ---- text and language models ----
_NOUNS = 'movie film plot acting music ending story cast script pace'.split()
_ADVS,_GOOD,_BAD = 'very quite rather really truly'.split(),'great superb lovely fine moving'.split(),'awful dull boring poor weak'.split()

def _reviews(n=400, seed=0):
    "`n` synthetic two-clause reviews (`the plot was very dull and the music was quite poor .`), `pos` or `neg` by their adjectives"
    rng = np.random.default_rng(seed)
    def clause(adjs): return f"the {rng.choice(_NOUNS)} was {rng.choice(_ADVS)} {rng.choice(adjs)}"
    rows = []
    for i in range(n):
        lab = 'pos' if i % 2 else 'neg'
        adjs = _GOOD if lab == 'pos' else _BAD
        rows.append((f"{clause(adjs)} and {clause(adjs)} .", lab))
    return pd.DataFrame(rows, columns=['text', 'label'])

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle')
def reviews_awd_lstm(fixed):
    "`text_classifier_learner` (a small AWD-LSTM, random weights) on `TextDataLoaders.from_df` of synthetic reviews"
    from fastai.text.all import TextDataLoaders, text_classifier_learner, AWD_LSTM, awd_lstm_clas_config
    dls = TextDataLoaders.from_df(_reviews(), text_col='text', label_col='label', valid_pct=0.2, seed=0, bs=16, seq_len=16, **_NW)
    return text_classifier_learner(dls, AWD_LSTM, pretrained=False, metrics=accuracy, drop_mult=0.3,
                                   config={**awd_lstm_clas_config, 'emb_sz': 32, 'n_hid': 48, 'n_layers': 2})

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle')
def reviews_language_model(fixed):
    "`language_model_learner` (a small AWD-LSTM with tied weights, random weights) on `TextDataLoaders(is_lm=True)` of reviews"
    from fastai.text.all import TextDataLoaders, language_model_learner, AWD_LSTM, awd_lstm_lm_config
    dls = TextDataLoaders.from_df(_reviews(600), text_col='text', is_lm=True, valid_pct=0.2, seed=0, bs=16, seq_len=12, **_NW)
    return language_model_learner(dls, AWD_LSTM, pretrained=False, drop_mult=0.3,
                                  config={**awd_lstm_lm_config, 'emb_sz': 32, 'n_hid': 48, 'n_layers': 2})

def _progressions(n=640, seq=17, vocab=50):
    "`n` token sequences counting up by 1, 2 or 3 (mod `vocab`) from a random start: a language model learns the step"
    g = torch.Generator().manual_seed(0)
    start,step = torch.randint(0, vocab, (n, 1), generator=g),torch.randint(1, 4, (n, 1), generator=g)
    return (start + step * torch.arange(seq)) % vocab

@healthy(epochs=4, lr=3e-3, fit='fit_one_cycle')
def gpt2_language_model(fixed):
    "A tiny GPT-2 (Hugging Face config, random weights) as a language model, `after_pred` taking the output's `.logits`"
    from transformers import GPT2Config, GPT2LMHeadModel
    x = _progressions()
    cfg = GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    return Learner(tensor_dls(x[:, :-1], x[:, 1:], bs=32), GPT2LMHeadModel(cfg), loss_func=CrossEntropyLossFlat(), cbs=HFLogits())

@healthy(epochs=4, lr=5e-3, fit='fit_one_cycle')
def bert_after_pred(fixed):
    "A tiny BERT classifier (Hugging Face config, random weights) behind an `after_pred` callback taking `.logits`"
    from transformers import BertConfig, BertForSequenceClassification
    g = torch.Generator().manual_seed(0)
    x,y = torch.randint(4, 60, (640, 16), generator=g),torch.randint(0, 2, (640,), generator=g)
    x[y == 1, 0] = 3                               # the class shows in the first token, which BERT's pooler reads
    cfg = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=32, num_labels=2)
    return Learner(tensor_dls(x, y, bs=32), BertForSequenceClassification(cfg), loss_func=CrossEntropyLossFlat(),
                   cbs=HFLogits(), metrics=accuracy)

class _LSTMClassifier(nn.Module):
    "An embedding, a one-layer `nn.LSTM` and a linear head on its last state: the PyTorch tutorials' sequence classifier"
    def __init__(self, vocab, emb=16, hid=32, n_out=2):
        super().__init__()
        self.emb,self.lstm,self.head = nn.Embedding(vocab, emb),nn.LSTM(emb, hid, batch_first=True),nn.Linear(hid, n_out)
    def forward(self, x): return self.head(self.lstm(self.emb(x))[1][0][-1])

@healthy(epochs=4, lr=1e-2, fit='fit')
def tokens_lstm_adam(fixed):
    "A PyTorch `nn.LSTM` classifier under Adam at a constant 1e-2: whether token 3 occurs in a sequence of 12"
    g = torch.Generator().manual_seed(0)
    x,y = torch.randint(4, 30, (640, 12), generator=g),torch.randint(0, 2, (640,), generator=g)
    x[y == 1, torch.randint(0, 12, (int(y.sum()),), generator=g)] = 3
    return Learner(tensor_dls(x, y, bs=32), _LSTMClassifier(30), loss_func=CrossEntropyLossFlat(), opt_func=Adam, metrics=accuracy)

# ---- collaborative filtering ----
def _ratings(n=3000):
    rng = np.random.default_rng(0)
    u,i = rng.normal(size=(60, 4)),rng.normal(size=(50, 4))
    users,items = rng.integers(0, 60, n),rng.integers(0, 50, n)
    r = np.clip(2.75 + (u[users] * i[items]).sum(1) * 0.6 + rng.normal(scale=0.3, size=n), 0.5, 5)
    return pd.DataFrame({'user': users, 'item': items, 'rating': r.astype('float32')})

@healthy(epochs=3, lr=5e-3, fit='fit_one_cycle')
def collab_neural(fixed):
    "`collab_learner(use_nn=True)`: fastai's `EmbeddingNN` on ratings made from latent factors"
    from fastai.collab import CollabDataLoaders, collab_learner
    dls = CollabDataLoaders.from_df(_ratings(), bs=64, seed=0, **_NW)
    return collab_learner(dls, use_nn=True, layers=[32], y_range=(0, 5.5))

# ---- schedules: slow starts and short budgets ----
def _mlp_digits(bs=32):
    "scikit-learn's digits as fastai tensors scaled to [0, 1], and a two-layer MLP"
    x,y = digits_raw()
    return tensor_dls(x / 16, y, bs=bs), nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle', fit_kw={'pct_start': 0.5, 'div': 100.})
def mlp_slow_warmup(fixed):
    "A slow start: one-cycle with half the run warming up from a hundredth of the top rate (loss flat for the first epoch)"
    dls,m = _mlp_digits(bs=64)
    return Learner(dls, m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=4, lr=0.1, fit='fit')
def mlp_sgd_slow_start(fixed):
    "A slow start: plain SGD (no momentum) at a constant 0.1 on an MLP; the loss crawls for an epoch, then falls faster"
    dls,m = _mlp_digits(bs=64)
    return Learner(dls, m, loss_func=CrossEntropyLossFlat(), opt_func=partial(SGD, mom=0.), metrics=accuracy)

@healthy(epochs=1, lr=1e-2, fit='fit_one_cycle')
def mlp_short_budget(fixed):
    "A short budget: one epoch of one-cycle, 59 batches, on an MLP"
    dls,m = _mlp_digits(bs=24)
    return Learner(dls, m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=3, lr=3e-3, fit='fit_flat_cos')
def mlp_flat_cos_adam(fixed):
    "`fit_flat_cos` under Adam on an MLP with BatchNorm and dropout"
    x,y = digits_raw()
    m = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    return Learner(tensor_dls(x / 16, y, bs=32), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)
