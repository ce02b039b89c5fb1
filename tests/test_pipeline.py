"""The tool's own passes (preflight, NaN tracer, heatmaps) go through the Learner's pipeline as training does (issue 45,
point 1): fastai's data blocks give `TensorImage`/`TensorCategory`/`TensorMask` batches that `CastToTensor` makes plain,
`after_pred` callbacks take a Hugging Face output's `.logits`, and `MixedPrecision` runs the forward in its autocast."""
import random, warnings
import numpy as np, pandas as pd, pytest, torch, torchvision
from torch import nn
from fastai.vision.all import (DataBlock, ImageBlock, CategoryBlock, MaskBlock, PILImageBW, PILMask, IndexSplitter,
                               Resize, unet_learner, resnet18, CrossEntropyLossFlat)
from fastai.tabular.all import TabularDataLoaders, tabular_learner, Categorify, Normalize
from fastai.text.all import TextBlock, ColReader, text_classifier_learner, AWD_LSTM, BaseTokenizer
from fastai.data.core import DataLoaders
from fastai.learner import Learner
from fastai.callback.core import Callback
from fastexplorer.all import *
from fastexplorer.preflight import *   # `Learner.preflight`
from fastexplorer.findings import Findings
from fastexplorer.training import rng_states
from fastexplorer.epoch import epoch_heatmaps
from untouched import Untouched

def _digits(n:int=48):
    from sklearn.datasets import load_digits
    d = load_digits()
    return (d.images[:n] * 255 / 16).astype(np.uint8),d.target[:n]

def digits_block_dls(bs:int=8, size:int=32):
    "The digits through fastai's data blocks, as PIL images resized: batches of `TensorImageBW` and `TensorCategory`"
    ims,ys = _digits()
    db = DataBlock((ImageBlock(cls=PILImageBW), CategoryBlock), get_x=lambda i: PILImageBW.create(ims[i]),
                   get_y=lambda i: int(ys[i]), splitter=IndexSplitter(range(40, 48)), item_tfms=Resize(size))
    return db.dataloaders(list(range(48)), bs=bs, num_workers=0)

def googlenet_learner(dls):
    "GoogLeNet (torchvision, random weights) on one channel: its output keeps the input's `TensorImage` type"
    torch.manual_seed(0)
    m = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True, num_classes=10,
                                     transform_input=False)
    m.conv1.conv = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    return Learner(dls, m, loss_func=nn.CrossEntropyLoss())

def inception_learner():
    "Inception v3 (torchvision, random weights) at its smallest input, 75 px: a `TensorImage` output, as GoogLeNet's"
    torch.manual_seed(0)
    m = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True, num_classes=10,
                                        transform_input=False)
    m.Conv2d_1a_3x3.conv = nn.Conv2d(1, 32, 3, 2, bias=False)
    return Learner(digits_block_dls(bs=4, size=75), m, loss_func=nn.CrossEntropyLoss())

def segmentation_dls(bs:int=4, size:int=32):
    "The digits as a segmentation task through `DataBlock(ImageBlock, MaskBlock)`: the mask marks the lit pixels"
    ims,_ = _digits(16)
    db = DataBlock((ImageBlock(cls=PILImageBW), MaskBlock(codes=['bg', 'ink'])),
                   get_x=lambda i: PILImageBW.create(ims[i]),
                   get_y=lambda i: PILMask.create((ims[i] > 64).astype(np.uint8)),
                   splitter=IndexSplitter(range(12, 16)), item_tfms=Resize(size))
    return db.dataloaders(list(range(16)), bs=bs, num_workers=0)

class TakeOut(Callback):
    "torchvision's segmentation models return `{'out': ...}`: the loss takes the `out` (as users write it)"
    def after_pred(self): self.learn.pred = self.pred['out']

def deeplab_learner():
    torch.manual_seed(0)
    m = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=2)
    m.backbone['0'][0] = nn.Conv2d(1, 16, 3, 2, 1, bias=False)
    return Learner(segmentation_dls(), m, loss_func=nn.CrossEntropyLoss(), cbs=TakeOut())

def unet():
    torch.manual_seed(0)
    return unet_learner(segmentation_dls(), resnet18, pretrained=False, n_in=1, n_out=2,
                        loss_func=nn.CrossEntropyLoss())

def tabular():
    "`tabular_learner` on the breast cancer data, one feature made categorical"
    from sklearn.datasets import load_breast_cancer
    torch.manual_seed(0)
    d = load_breast_cancer(as_frame=True)
    df = d.frame.iloc[:128].copy(); df['size'] = pd.cut(df['mean radius'], 3, labels=['s', 'm', 'l']).astype(str)
    conts = list(d.feature_names[:8])
    dls = TabularDataLoaders.from_df(df, procs=[Categorify, Normalize], cat_names=['size'], cont_names=conts,
                                     y_names='target', y_block=CategoryBlock(), bs=32, valid_idx=list(range(96, 128)))
    return tabular_learner(dls, layers=[16, 8])

def text():
    """A small AWD-LSTM classifier: fastai's `text_classifier_learner`, random weights, its `RNNCallback` and regulariser.
    Weight dropout stays on: at `drop_mult=0`, fastai's own validation fails (`WeightDropout` leaves its weight a
    `Parameter` that its `reset` cannot replace)"""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    words = ['good', 'great', 'fine', 'bad', 'awful', 'poor', 'the', 'film', 'was', 'plot']
    df = pd.DataFrame({'text': [' '.join(rng.choice(words, 8)) for _ in range(64)], 'label': ['pos', 'neg'] * 32})
    db = DataBlock((TextBlock.from_df('text', tok=BaseTokenizer(), n_workers=0), CategoryBlock),
                   get_x=ColReader('text'), get_y=ColReader('label'), splitter=IndexSplitter(range(48, 64)))
    dls = db.dataloaders(df, bs=8, num_workers=0)
    cfg = dict(emb_sz=16, n_hid=32, n_layers=2)
    return text_classifier_learner(dls, AWD_LSTM, pretrained=False, config=cfg, drop_mult=0.5)

HEALTHY_BLOCKS = {'googlenet_vision_block': lambda: googlenet_learner(digits_block_dls()),
                  'inception_v3_vision_block': inception_learner,
                  'deeplabv3_segmentation_block': deeplab_learner, 'unet_segmentation_block': unet,
                  'tabular_learner': tabular, 'awd_lstm_text_block': text}

@pytest.mark.parametrize('name', HEALTHY_BLOCKS)
def test_preflight_is_quiet_on_fastai_data_blocks(name):
    """Healthy learners built on fastai's data blocks (vision, segmentation, tabular, text): no error, every check of
    the training forward run. Real case: GoogLeNet, Inception v3 and DeepLabv3 through fastai's data blocks were called
    broken ("the loss cannot be computed"): `nn.CrossEntropyLoss` refuses a `TensorImage` output with a
    `TensorCategory` or `TensorMask` target, which fastai's `CastToTensor` makes plain in training"""
    random.seed(0)   # the DataLoaders' shuffle
    learn = HEALTHY_BLOCKS[name]()
    u,kept = Untouched(learn.model),{k: learn.__dict__.get(k, 'absent') for k in ('xb', 'yb', 'pred', 'loss')}
    v = learn.preflight()
    u.check()
    assert [(x['check'], x['evidence']) for x in v if x['severity'] == 'error'] == [], v
    checks = {x['check'] for x in v}   # the loss computed and judged (its level at initialisation is another check's)
    assert checks >= {'constant_output', 'gradient_flow'} and checks & {'loss_contract', 'loss_at_init'}, v
    assert {k: learn.__dict__.get(k, 'absent') for k in kept} == kept, "the learner's batch attributes left changed"

class TakeLogits(Callback):
    "A Hugging Face model returns a `ModelOutput`: the loss takes its `.logits` (blurr's and the tutorials' callback)"
    def after_pred(self): self.learn.pred = self.pred.logits

def tokens(n:int=32, t:int=12, vocab:int=64):
    "Token ids and a label (whether token 7 occurs), from a fixed generator"
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (n, t), generator=g)
    return ids,(ids == 7).any(1).long()

def bert_learner():
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=16, num_labels=2)
    ids,y = tokens()
    dls = DataLoaders.from_dsets(list(zip(ids, y)), list(zip(ids, y)), bs=16)
    return Learner(dls, BertForSequenceClassification(cfg), loss_func=CrossEntropyLossFlat(), cbs=TakeLogits())

def gpt2_learner():
    "A causal language model: the targets are the inputs shifted by one token"
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    ids,_ = tokens(t=13)
    ds = list(zip(ids[:, :-1], ids[:, 1:]))
    return Learner(DataLoaders.from_dsets(ds, ds, bs=16), GPT2LMHeadModel(cfg), loss_func=CrossEntropyLossFlat(),
                   cbs=TakeLogits())

@pytest.mark.parametrize('make', [bert_learner, gpt2_learner], ids=['bert', 'gpt2'])
def test_preflight_runs_the_after_pred_callbacks(make):
    """A tiny BERT classifier and GPT-2 language model (random weights) whose `ModelOutput` an `after_pred` callback
    turns into its `.logits`. Real case: both were called broken, "the loss cannot be computed on the first batch", the
    loss given the `ModelOutput`, and none of the other checks ran"""
    learn = make()
    v = learn.preflight()
    assert [(x['check'], x['evidence']) for x in v if x['severity'] == 'error'] == [], v
    lc = next(x for x in v if x['check'] == 'loss_contract')
    assert lc['evidence'].startswith('loss '), lc   # judged on a computed loss
    assert 'gradient_flow' in {x['check'] for x in v}, v

@pytest.mark.parametrize('amp', ['to_bf16', 'to_fp16'])
def test_preflight_under_mixed_precision_on_a_data_block(amp, fastai_amp_on_cpu):
    """fastai's `MixedPrecision` on a `DataBlock(ImageBlock, CategoryBlock)` learner: the checks run, the forward in the
    half type, the loss on the float32 output. Real case: GoogLeNet through fastai's data blocks, trained with
    `to_fp16()`, which the preflight called broken"""
    random.seed(0)   # the DataLoaders' shuffle
    learn = getattr(googlenet_learner(digits_block_dls()), amp)()
    seen = []
    h = learn.model.fc.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    try: v = learn.preflight()
    finally: h.remove()
    assert [(x['check'], x['evidence']) for x in v if x['severity'] == 'error'] == [], v
    assert {x['check'] for x in v} >= {'loss_contract', 'constant_output', 'gradient_flow', 'batch_independence'}, v
    assert seen and seen[0] == (torch.bfloat16 if amp == 'to_bf16' else torch.float16), seen

def test_a_loss_that_cannot_be_computed_has_no_ok_contract():
    """A Hugging Face classifier given to a Learner without the callback that takes its `.logits`. Source:
    "'SequenceClassifierOutput' object has no attribute 'view'", asked on the fastai forums by users of `transformers`;
    the fix is that callback.
    The loss cannot be computed: an error, and no "loss_contract: ok" beside it (there was)"""
    learn = bert_learner()
    learn.remove_cb(learn.take_logits)
    v = learn.preflight()
    assert any(a['check'] == 'loss' and a['severity'] == 'error' for a in v), v
    assert not any(a['check'] == 'loss_contract' and a['severity'] == 'ok' for a in v), v

class Dist(nn.Module):
    "A Euclidean norm written by hand: the square root of a sum of squares, whose gradient at 0 is infinite"
    def forward(self, x): return x.pow(2).sum(-1, keepdim=True).sqrt()

class NormNet(nn.Module):
    "A model returning a Hugging Face `ModelOutput`, with a norm of its features written by hand"
    def __init__(self):
        super().__init__()
        self.body,self.dist,self.head = nn.Linear(4, 4),Dist(),nn.Linear(1, 2)
    def forward(self, x):
        from transformers.modeling_outputs import SequenceClassifierOutput
        return SequenceClassifierOutput(logits=self.head(self.dist(self.body(x))))

def test_the_tracer_runs_the_after_pred_callbacks():
    """The NaN tracer, after a backward, computes the loss again through the learner's `after_pred` callbacks. Real
    case:
    NaN gradients from `sqrt` of a sum of squares at 0 (a hand-written distance; "NaN gradient at zero of torch.norm /
    sqrt", a frequent PyTorch forum question); the model returns a `ModelOutput` whose `.logits` a callback takes. The
    forward is finite, the backward is not: the tracer named nothing, the loss given the `ModelOutput`"""
    torch.manual_seed(0)
    ids,y = torch.randn(8, 4),torch.randint(0, 2, (8,))
    dls = DataLoaders.from_dsets([(0,)], [(0,)])
    learn = Learner(dls, NormNet(), loss_func=CrossEntropyLossFlat(), cbs=TakeLogits())
    with torch.no_grad(): learn.model.body.bias.zero_()
    ids[3] = 0.   # its features are 0, their norm too: the gradient of `sqrt` there is infinite
    rng = rng_states(learn.model)
    learn.xb,learn.yb = (ids,),(y,)
    learn.pred = learn.model(ids).logits
    learn.loss = learn.loss_func(learn.pred, y)
    f = Findings({'name': 'Learner', 'path': '', 'nodes': []})
    with warnings.catch_warnings():
        warnings.simplefilter('error')   # a trace that fails is a warning: none
        f.trace(learn, rng, step=3, epoch=1, backward=True)
    assert f.origin is not None and f.origin['layer'] == 'dist', f.origin
    assert learn.pred.shape == (8, 2) and learn.xb[0] is ids, "the learner's batch attributes left changed"

class Gray3(Callback):
    "Grayscale images for a 3-channel model: the channel repeated in `before_batch`"
    def before_batch(self): self.learn.xb = (self.xb[0].expand(-1, 3, -1, -1),)

def test_heatmaps_and_preflight_take_the_batch_through_before_batch():
    """The heatmaps' samples reach the model as validation hands them over: through `before_batch` (here a callback
    turning grayscale digits into the 3 channels a resnet18 takes, a common fastai forum recipe; and fastai's
    `CastToTensor`). Before, the maps ran the raw 1-channel `TensorImage` batch and failed on the first convolution"""
    torch.manual_seed(0)
    learn = Learner(digits_block_dls(), torchvision.models.resnet18(num_classes=10), loss_func=nn.CrossEntropyLoss(),
                    cbs=Gray3())
    xb,info = heatmap_samples(learn, 2)
    assert type(xb[0]) is torch.Tensor and xb[0].shape[:2] == (2, 3), (type(xb[0]), xb[0].shape)
    assert info[0]['image']['c'] == 1   # the page shows the image the data gave
    maps = epoch_heatmaps(learn, xb, info, 8)
    assert 'conv1' in maps['layers'] and len(maps['layers']['conv1']['maps']) == 2, list(maps['layers'])[:4]
    v = learn.preflight()
    assert [(x['check'], x['evidence']) for x in v if x['severity'] == 'error'] == [], v

class Counter(Callback):
    "A user's callback that counts the batches it sees: a pass of the tool's own runs it, then puts its count back"
    def before_batch(self): self.n = getattr(self, 'n', 0) + 1

def test_the_extra_passes_leave_the_training_as_it_was(tmp_path):
    """A one-cycle fit of the digits CNN with `MixUp` and a user's callback: with the preflight and heatmaps on, the
    losses, learning rates and counts are those of the same fit without them (the schedulers, the recorder and the
    augmentation never run for an extra pass; what a user's callback sets is put back)"""
    from fastai.callback.mixup import MixUp
    def fit(pre:bool):
        torch.manual_seed(0)
        learn = digits_learner()
        xc = ExplorerCallback(tmp_path/f'run{pre}', every=5, preflight=pre, heatmaps=2 if pre else 0)
        cbs = [Counter(), MixUp(), xc]
        with learn.no_bar(), learn.no_logging(): learn.fit_one_cycle(1, 1e-2, cbs=cbs)
        return learn.recorder.losses,learn.recorder.lrs,cbs[0].n
    (l0,lr0,n0),(l1,lr1,n1) = fit(False),fit(True)
    assert n1 == n0 and lr1 == lr0, (n0, n1)
    assert torch.equal(torch.stack(l1), torch.stack(l0)), 'the fit changed'

class _CPUAutocast(Callback):
    "A user's mixed precision on the CPU: a bfloat16 autocast opened in `before_batch`, closed in `after_loss`"
    order = 10
    def before_batch(self): self.ctx = torch.autocast('cpu', dtype=torch.bfloat16); self.ctx.__enter__()
    def after_loss(self): self.ctx.__exit__(None, None, None)

def test_a_pass_leaves_no_autocast_on():
    """A pass that runs a callback's `before_batch` but not its `after_loss` (the preflight's casts, the heatmaps'
    samples) leaves no autocast on. Real case: `tests/test_scale.py`'s bfloat16 run left the CPU autocast on for every
    later test of the suite (torchinfo's fixtures then met `BFloat16 did not match Float`)"""
    learn = digits_learner(cbs=_CPUAutocast())
    b = learn.dls.train.one_batch()
    learn.preflight(b)
    assert not torch.is_autocast_enabled('cpu')
    learner_batch(learn, b[:1], b[1:])
    assert not torch.is_autocast_enabled('cpu')
