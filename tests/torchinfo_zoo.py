"""Models of the kinds torchinfo's own tests use, each with the inputs to call it with and what torchinfo gets wrong on it.

The kinds follow torchinfo's `tests/fixtures/models.py` (LSTM and packed sequences, recursive and shared modules, siamese
nets, dict / `None` / str / namedtuple inputs and outputs, containers holding parameters, tied and pruned weights, lazy
layers, scripted and partly scripted models, a detection model, keyword inputs); the code is written here.
Every builder takes no argument, seeds its own weights and inputs, and returns a `Case`.
"""
from __future__ import annotations
import dataclasses
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Callable, Optional
import torch, torchvision
from torch import nn
from torch.nn.utils import prune
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

def _gen(seed=0): return torch.Generator().manual_seed(seed)
def _randn(*shape, seed=0): return torch.randn(*shape, generator=_gen(seed))

@dataclass
class Case:
    "A model, the inputs `represent` and torchinfo get, and torchinfo's known departures from the independent oracle"
    model: nn.Module
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    input_size: object = None         # instead of `args`: `represent(model, input_size=, dtypes=)` and torchinfo's likewise
    dtypes: object = None
    ti_fails: str|None = None         # why `torchinfo.summary` cannot run on this model
    ti_shapes: dict = field(default_factory=dict)  # `{path: why}`: modules whose output shape torchinfo reports otherwise
    ti_params: Callable|None = None   # `f(model)->(total, trainable)`: what torchinfo counts, where it is not the oracle's
    ti_params_why: str = ''
    io: tuple|None = None             # `(inputs, outputs)` `describe` must give on the Input and Output nodes

# ---- LSTM and packed sequences ----
class LSTMNet(nn.Module):
    "Embedding, a two-layer LSTM returning `(out, (h, c))`, and a linear head on every step"
    def __init__(self, vocab=20, emb=8, hid=12):
        super().__init__()
        self.emb,self.lstm,self.head = nn.Embedding(vocab, emb),nn.LSTM(emb, hid, num_layers=2, batch_first=True),nn.Linear(hid, vocab)
    def forward(self, x):
        out, (h, c) = self.lstm(self.emb(x))
        return self.head(out), h

def lstm(): return Case(LSTMNet(), (torch.randint(0, 20, (3, 7), generator=_gen()),))

class PackedLSTM(nn.Module):
    "An LSTM over a padded batch packed with the `lengths=` keyword input, unpacked again for the head"
    def __init__(self, vocab=20, emb=8, hid=12):
        super().__init__()
        self.emb,self.lstm,self.head = nn.Embedding(vocab, emb),nn.LSTM(emb, hid, batch_first=True),nn.Linear(hid, 2)
    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return self.head(out)

def packed_lstm():
    x = torch.randint(1, 20, (3, 6), generator=_gen())
    lengths = torch.tensor([6, 2, 4])
    for i,n in enumerate(lengths): x[i, n:] = 0
    # the LSTM's input and output are PackedSequences of 12 = 6+2+4 steps
    return Case(PackedLSTM(), (x,), {'lengths': lengths})

class LSTMOnPacked(nn.Module):
    "An LSTM given a PackedSequence as its input (the caller packs), its last hidden state into a head"
    def __init__(self):
        super().__init__()
        self.lstm,self.head = nn.LSTM(4, 6),nn.Linear(6, 2)
    def forward(self, ps): return self.head(self.lstm(ps)[1][0][-1])

def packed_input():
    ps = pack_padded_sequence(_randn(3, 5, 4), torch.tensor([5, 3, 2]), batch_first=True)
    return Case(LSTMOnPacked(), (ps,), ti_fails="torchinfo sizes its inputs by rebuilding each namedtuple from its fields' sizes: "
                                                 "a PackedSequence of `torch.Size`s raises AttributeError",
                io=([{'shape': [10, 4], 'dtype': 'float32', 'packed': True, 'batch_size': 3}],
                                           {'shape': [3, 2], 'dtype': 'float32'}))

# ---- recursive, reused and shared modules ----
class Recursive(nn.Module):
    "One conv applied three times and one ReLU reused after every layer (torchinfo's RecursiveNet and ReuseReLU)"
    def __init__(self):
        super().__init__()
        self.conv1,self.conv,self.act,self.fc = nn.Conv2d(3, 6, 3, padding=1),nn.Conv2d(6, 6, 3, padding=1),nn.ReLU(),nn.Linear(6, 2)
    def forward(self, x):
        x = self.act(self.conv1(x))
        for _ in range(3): x = self.act(self.conv(x))
        return self.fc(x.mean((2, 3)))

def recursive(): return Case(Recursive(), (_randn(2, 3, 8, 8),))

class TwoParents(nn.Module):
    "A Linear registered under two parents (and under the root), called through both"
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(5, 5)
        self.a = nn.Sequential(self.shared, nn.ReLU())
        self.b = nn.Sequential(nn.Tanh(), self.shared)
        self.out = nn.Linear(5, 1)
    def forward(self, x): return self.out(self.b(self.a(x)))

def two_parents():
    return Case(TwoParents(), (_randn(4, 5),), ti_params=_per_registration,
                ti_params_why="torchinfo counts the shared Linear once per parent registering it (3 x 30)")

class Siamese(nn.Module):
    "One encoder run on two inputs, the distance between the codes into a head"
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 1)
    def forward(self, x1, x2): return torch.sigmoid(self.head((self.enc(x1) - self.enc(x2)).abs()))

def siamese(): return Case(Siamese(), (_randn(2, 1, 10, 10), _randn(2, 1, 10, 10, seed=1)))

# ---- odd inputs and outputs ----
class DictOut(nn.Module):
    "A leaf returning `{'feat', 'norm'}`: torchinfo reports a dict by its last value"
    def forward(self, x): return {'feat': x, 'norm': x.norm(dim=1)}

class DictIO(nn.Module):
    "A dict input, a leaf returning a dict, and a dict output"
    def __init__(self):
        super().__init__()
        self.img,self.tab,self.split,self.head = nn.Linear(12, 6),nn.Linear(3, 6),DictOut(),nn.Linear(6, 2)
    def forward(self, batch):
        d = self.split(self.img(batch['img'].flatten(1)) + self.tab(batch['tab']))
        return {'logits': self.head(d['feat']), 'norm': d['norm']}

def dict_io():
    return Case(DictIO(), ({'img': _randn(2, 3, 2, 2), 'tab': _randn(2, 3, seed=1)},),
                ti_shapes={'split': 'torchinfo reports a dict output by its last value (`norm`, [2]), not its first (`feat`, [2, 6])',
                           '': 'likewise the model\'s dict output: `norm` [2], not `logits` [2, 2]'},
                io=([{'img': {'shape': [2, 3, 2, 2], 'dtype': 'float32'}, 'tab': {'shape': [2, 3], 'dtype': 'float32'}}],
                    {'logits': {'shape': [2, 2], 'dtype': 'float32'}, 'norm': {'shape': [2], 'dtype': 'float32'}}))

class NoneOut(nn.Module):
    "A leaf returning `None` (a logging layer)"
    def forward(self, x): return None

class NoneStrIO(nn.Module):
    "A `str` mode input, an optional input left `None`, a `None`-returning leaf, and `(out, None)` as output"
    def __init__(self):
        super().__init__()
        self.fc,self.log,self.bias = nn.Linear(4, 3),NoneOut(),nn.Linear(4, 3)
    def forward(self, x, mode:str, extra=None):
        self.log(x)
        y = self.fc(x) if mode == 'plain' else self.fc(x) + self.bias(x)
        return y if extra is None else y + extra, None

def none_str_io():
    return Case(NoneStrIO(), (_randn(2, 4), 'plain', None), ti_fails="torchinfo's memory total adds the str input to the tensors' byte sizes: int + str",
                io=([{'shape': [2, 4], 'dtype': 'float32'}, {'type': 'str'}, None], [{'shape': [2, 3], 'dtype': 'float32'}, None]))

Pair = namedtuple('Pair', ['left', 'right'])
Scores = namedtuple('Scores', ['logits', 'hidden'])

class NamedTupleIO(nn.Module):
    "A namedtuple `Pair(left, right)` in, a namedtuple `Scores(logits, hidden)` out"
    def __init__(self):
        super().__init__()
        self.l,self.r,self.head = nn.Linear(4, 6),nn.Linear(5, 6),nn.Linear(6, 3)
    def forward(self, p:Pair):
        h = torch.relu(self.l(p.left) + self.r(p.right))
        return Scores(self.head(h), h)

def namedtuple_io():
    f = lambda s: {'shape': s, 'dtype': 'float32'}
    return Case(NamedTupleIO(), (Pair(_randn(2, 4), _randn(2, 5, seed=1)),),
                ti_fails="torchinfo's memory total rebuilds a namedtuple's aggregate as `sum(*sizes)`: 'int' object is not iterable",
                io=([{'type': 'Pair', 'fields': {'left': f([2, 4]), 'right': f([2, 5])}}],
                    {'type': 'Scores', 'fields': {'logits': f([2, 3]), 'hidden': f([2, 6])}}))

@dataclass
class Batch:
    x: torch.Tensor
    mask: Optional[torch.Tensor] = None
    name: str = 'b'

@dataclass
class Result:
    logits: torch.Tensor
    attn: Optional[torch.Tensor] = None

class DataclassIO(nn.Module):
    "A dataclass `Batch` in, a dataclass `Result` out, and the `attention_mask=` keyword input"
    def __init__(self):
        super().__init__()
        self.proj,self.head = nn.Linear(4, 8),nn.Linear(8, 2)
    def forward(self, b:Batch, attention_mask=None):
        h = self.proj(b.x) * (b.mask if b.mask is not None else 1)
        if attention_mask is not None: h = h * attention_mask[..., None]
        return Result(self.head(h.mean(1)), attention_mask)

def dataclass_io():
    f = lambda s, d='float32': {'shape': s, 'dtype': d}
    b = Batch(_randn(2, 3, 4), torch.ones(2, 3, 1))
    am = torch.tensor([[1, 1, 0], [1, 0, 0]])
    return Case(DataclassIO(), (b,), {'attention_mask': am},
                ti_fails="torchinfo raises on a dataclass output ('unsupported input or output type')",
                io=([{'type': 'Batch', 'fields': {'x': f([2, 3, 4]), 'mask': f([2, 3, 1]), 'name': {'type': 'str'}}},
                     {'attention_mask': f([2, 3], 'int64')}],
                    {'type': 'Result', 'fields': {'logits': f([2, 2]), 'attn': f([2, 3], 'int64')}}))

class KeywordInputs(nn.Module):
    "Keyword inputs `x2=` and `attention_mask=` (as torchinfo's `summary(model, x, **kwargs)` forwards them)"
    def __init__(self):
        super().__init__()
        self.a,self.b,self.out = nn.Linear(6, 4),nn.Linear(3, 4),nn.Linear(4, 2)
    def forward(self, x, x2=None, attention_mask=None):
        h = self.a(x)
        if x2 is not None: h = h + self.b(x2)
        if attention_mask is not None: h = h * attention_mask
        return self.out(h)

def keyword_inputs():
    f = lambda s: {'shape': s, 'dtype': 'float32'}
    return Case(KeywordInputs(), (_randn(2, 6),), {'x2': _randn(2, 3, seed=1), 'attention_mask': torch.ones(2, 4)},
                io=([f([2, 6]), {'x2': f([2, 3]), 'attention_mask': f([2, 4])}], f([2, 2])))

class Holder:
    "A plain object holding tensors in its attributes (torchinfo's ObjectWithTensors; torchvision's ImageList is one)"
    def __init__(self, x, aux): self.x,self.aux = x,aux

class ObjectIO(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
    def forward(self, o:Holder): return Holder(self.fc(o.x), o.aux * 2)

def object_io():
    f = lambda s: {'shape': s, 'dtype': 'float32'}
    return Case(ObjectIO(), (Holder(_randn(2, 4), _randn(3, seed=1)),),
                ti_fails="torchinfo raises on an output that is a plain object ('unsupported input or output type')",
                io=([{'type': 'Holder', 'fields': {'x': f([2, 4]), 'aux': f([3])}}],
                    {'type': 'Holder', 'fields': {'x': f([2, 2]), 'aux': f([3])}}))

class Unused(nn.Module):
    "A ModuleList whose last layer is never called, and an auxiliary head run only in training (torchinfo's missing layers)"
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)])
        self.aux,self.head = nn.Linear(4, 1),nn.Linear(4, 2)
    def forward(self, x):
        for l in self.layers[:2]: x = torch.relu(l(x))
        return (self.head(x), self.aux(x)) if self.training else self.head(x)

def unused(): return Case(Unused(), (_randn(3, 4),))

# ---- parameters held by containers, tied, pruned, frozen, lazy, parametrized ----
class ParamContainers(nn.Module):
    "Parameters in a ParameterList, a ParameterDict, registered on the root, and frozen; modules in a ModuleDict"
    def __init__(self):
        super().__init__()
        self.plist = nn.ParameterList([nn.Parameter(torch.randn(4, 4)), nn.Parameter(torch.randn(4))])
        self.pdict = nn.ParameterDict({'scale': nn.Parameter(torch.ones(4)), 'shift': nn.Parameter(torch.zeros(4), requires_grad=False)})
        self.register_parameter('gain', nn.Parameter(torch.ones(1)))
        self.blocks = nn.ModuleDict({'first': nn.Linear(4, 4), 'second': nn.Linear(4, 3)})
        self.blocks['second'].weight.requires_grad_(False)
    def forward(self, x):
        x = x @ self.plist[0] + self.plist[1]
        x = x * self.pdict['scale'] + self.pdict['shift']
        return self.blocks['second'](torch.relu(self.blocks['first'](x))) * self.gain

def param_containers(): return Case(ParamContainers(), (_randn(3, 4),))

class TiedLM(nn.Module):
    "A language model whose decoder weight is its embedding's"
    def __init__(self, vocab=30, d=8):
        super().__init__()
        self.emb,self.rnn,self.dec = nn.Embedding(vocab, d),nn.GRU(d, d, batch_first=True),nn.Linear(d, vocab)
        self.dec.weight = self.emb.weight
    def forward(self, x): return self.dec(self.rnn(self.emb(x))[0])

def tied():
    return Case(TiedLM(), (torch.randint(0, 30, (2, 5), generator=_gen()),), ti_params=_per_registration,
                ti_params_why="torchinfo counts the tied weight twice, in the embedding and in the decoder")

def _per_registration(m:nn.Module)->tuple:
    "(total, trainable) counting a module once per parent registering it, a tied tensor once per module holding it: torchinfo's sum"
    ps = [p for _,o in m.named_modules(remove_duplicate=False) for p in o.parameters(recurse=False)]
    return sum(p.numel() for p in ps), sum(p.numel() for p in ps if p.requires_grad)

def _masked_out(m:nn.Module)->int:
    "How many entries the pruning masks of `m` zero"
    return sum(int((b == 0).sum()) for n,b in m.named_buffers() if n.endswith('_mask'))

def pruned():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4*6*6, 5), nn.ReLU(), nn.Linear(5, 2))
    prune.l1_unstructured(m[0], 'weight', amount=0.5)
    prune.random_unstructured(m[3], 'weight', amount=0.3)
    prune.l1_unstructured(m[5], 'bias', amount=1)
    # the parameters are `weight_orig` (all of it) and the masks buffers: a masked entry is still stored and trained
    # (its gradient is zero); torchinfo counts only the mask's ones
    def ti(model): return tuple(n - _masked_out(model) for n in _counts(model))
    return Case(m, (_randn(2, 3, 8, 8),), ti_params=ti,
                ti_params_why="torchinfo counts a pruned tensor by its mask's ones; the oracle counts `weight_orig` whole, as "
                              "`model.parameters()` and an optimizer see it")

def _counts(m:nn.Module)->tuple:
    "(total, trainable) of the distinct parameters of `m`"
    ps = {id(p): p for p in m.parameters()}.values()
    return sum(p.numel() for p in ps), sum(p.numel() for p in ps if p.requires_grad)

def frozen_resnet():
    "torchvision resnet18 with its stem and `layer1` frozen, probed from `input_size`"
    m = torchvision.models.resnet18(weights=None, num_classes=4)
    for mod in (m.conv1, m.bn1, m.layer1): mod.requires_grad_(False)
    return Case(m, input_size=(1, 3, 32, 32))

def lazy():
    m = nn.Sequential(nn.LazyConv2d(4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5), nn.ReLU(), nn.Linear(5, 2))
    return Case(m, (_randn(2, 3, 6, 6),))

def parametrized():
    "Weight norm and an orthogonal parametrization: the parameters live in `parametrizations.weight`, whose modules run on access"
    m = nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Linear(4, 3)), nn.ReLU(),
                      nn.utils.parametrizations.orthogonal(nn.Linear(3, 3)))
    return Case(m, (_randn(2, 4),))

# ---- input_size and dtypes ----
class TokensAndImage(nn.Module):
    "Integer tokens and an image: two inputs with two dtypes"
    def __init__(self):
        super().__init__()
        self.emb,self.conv,self.head = nn.Embedding(10, 4),nn.Conv2d(3, 4, 3, padding=1),nn.Linear(8, 2)
    def forward(self, tok, img): return self.head(torch.cat([self.emb(tok).mean(1), self.conv(img).mean((2, 3))], 1))

def tokens_and_image(): return Case(TokensAndImage(), input_size=[(2, 5), (2, 3, 6, 6)], dtypes=[torch.long, torch.float32])

# ---- TorchScript ----
class Block(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.conv,self.bn = nn.Conv2d(i, o, 3, padding=1),nn.BatchNorm2d(o)
    def forward(self, x): return torch.relu(self.bn(self.conv(x)))

class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1,self.b2,self.pool,self.fc = Block(3, 4),Block(4, 6),nn.AdaptiveAvgPool2d(1),nn.Linear(6, 3)
    def forward(self, x): return self.fc(self.pool(self.b2(self.b1(x))).flatten(1))

def scripted(): return Case(torch.jit.script(CNN().eval()), (_randn(2, 3, 8, 8),))

def partly_scripted():
    m = CNN()
    m.b2 = torch.jit.script(m.b2)
    def ti(model):
        tot,tr = _counts(model)
        return tot + _counts(model.b2)[0], tr + _counts(model.b2)[1]
    return Case(m, (_randn(2, 3, 8, 8),), ti_params=ti,
                ti_params_why="torchinfo counts the scripted block twice: in its layers' rows (added without a forward) "
                              "and in the root's leftover, since the block's row was made before the root's")

# ---- a detection model in eval ----
def detection():
    "Faster R-CNN (MobileNetV3 FPN), small images and few detections to stay fast; a list of images in, a list of dicts out"
    torch.manual_seed(0)
    m = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=96, box_detections_per_img=10).eval()
    imgs = [torch.rand(3, 64, 80, generator=_gen()), torch.rand(3, 48, 64, generator=_gen(1))]
    last = 'torchinfo reports an OrderedDict of feature maps by its last value (`pool`), not its first (`0`)'
    return Case(m, (imgs,), ti_shapes={'backbone': last, 'backbone.body': last, 'backbone.fpn': last})

BUILDERS = [lstm, packed_lstm, packed_input, recursive, two_parents, siamese, dict_io, none_str_io, namedtuple_io, dataclass_io,
            keyword_inputs, object_io, unused, param_containers, tied, pruned, parametrized, frozen_resnet, lazy, tokens_and_image, scripted, partly_scripted,
            detection]
"Every case's builder, in the order the tests run them"
