"Alerts on real architectures (random weights): units on the layer's own axis, dead by the layer's rule, a NaN run with one alert."
import math
import pytest, torch, torchvision
from torch import nn
from fastai.callback.core import Callback
from fastai.learner import Learner
from fastai.optimizer import SGD
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *
from zoo import ZOO, VOCAB, learner, images, tokens

def _fit(learn, path, n=1, lr=1e-3, every=1, **kw):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, lr, cbs=ExplorerCallback(path, every=every, **kw))
    return load_run(path)

def convnext(): return learner(torchvision.models.convnext_tiny(num_classes=10), images())
def swin(): return learner(torchvision.models.swin_t(num_classes=10), images())
def efficientnet(): return learner(torchvision.models.efficientnet_b0(num_classes=10), images())
def mobilenet(): return learner(torchvision.models.mobilenet_v3_small(num_classes=10), images())
def fastai_vision():
    from fastai.vision.all import vision_learner, resnet18, CrossEntropyLossFlat
    from zoo import dls_from
    return vision_learner(dls_from(images(), y=torch.arange(8) % 2), resnet18, pretrained=False, n_out=2, loss_func=CrossEntropyLossFlat())
def small_vit(): return learner(torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                                     hidden_dim=32, mlp_dim=64, num_classes=10), images())

def timm_resnet():
    timm = pytest.importorskip('timm')
    return learner(timm.create_model('resnet18', pretrained=False, num_classes=10), images())
def timm_vit():
    timm = pytest.importorskip('timm')
    return learner(timm.create_model('vit_tiny_patch16_224', pretrained=False, img_size=32, patch_size=8, embed_dim=64,
                                     num_heads=2, depth=2, num_classes=10), images())

class Logits(nn.Module):
    "A Hugging Face model returning its `ModelOutput`'s `logits`, as a fastai loss wants them"
    def __init__(self, model): super().__init__(); self.model = model
    def forward(self, x): return self.model(x).logits

def bert():
    tf = pytest.importorskip('transformers')
    cfg = tf.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                        max_position_embeddings=16, num_labels=2)
    return learner(Logits(tf.BertForSequenceClassification(cfg)), tokens(), y=torch.arange(8) % 2)
def gpt2():
    "GPT-2 as a language model: each position predicts the next token"
    tf = pytest.importorskip('transformers')
    cfg = tf.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=64, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=1)
    t = tokens(seq=13)
    return learner(Logits(tf.GPT2LMHeadModel(cfg)), t[:, :-1], y=t[:, 1:])

def _expected_units(model:nn.Module, path:str):
    "The number of units of layer `path`, from its definition alone: the oracle for the unit axis"
    m = model.get_submodule(path)
    if isinstance(m, nn.Conv2d): return m.out_channels
    if isinstance(m, nn.Linear): return m.out_features
    if isinstance(m, nn.LayerNorm): return m.normalized_shape[-1]           # torchvision's LayerNorm2d (NCHW) too
    if type(m).__name__ == 'Conv1D': return m.nf                             # Hugging Face's GPT-2 linear layer (weight [in, out])
    if isinstance(m, nn.GELU) or type(m).__name__.endswith('GELUActivation'):   # after the layer that feeds it, channels last
        parent,_,i = path.rpartition('.')
        up = model.get_submodule(parent)                                     # a Sequential; timm's Mlp, BERT's intermediate, GPT-2's MLP
        prev = up[int(i) - 1] if i.isdigit() else next(getattr(up, k) for k in ('fc1', 'dense', 'c_fc') if hasattr(up, k))
        return prev.nf if type(prev).__name__ == 'Conv1D' else prev.out_features
    return None

@pytest.mark.parametrize('make,at_least', [(convnext, 40), (swin, 40), (timm_vit, 17), (bert, 21), (gpt2, 16)])
def test_units_on_channels_last_layers(make, at_least, tmp_path):
    "ConvNeXt's and Swin's LayerNorm, Linear and GELU run on [B, H, W, C], a timm ViT's, BERT's and GPT-2's on [B, T, C]: every layer counts its channels, as its definition says"
    learn = make()
    run = _fit(learn, tmp_path/'run')
    checked = 0
    for layer,_ in learn.model.named_modules():
        if (want := _expected_units(learn.model, layer)) is None: continue
        if (a := run.stats(layer)[0]) is None: continue         # Swin's attention calls `qkv` and `proj` through F.linear: never run
        assert a['units'] == want, (layer, a['units'], want, a['unit_dim'])
        checked += 1
    assert checked >= at_least, checked

def test_dead_channels_in_a_channels_last_block(tmp_path):
    "300 of 384 channels of a ConvNeXt block made constant: counted exactly (against the outputs seen by a hook), and named"
    learn = convnext()
    block = learn.model.features[1][0].block
    with torch.no_grad(): block[3].weight[:300] = 0; block[3].bias[:300] = -100.   # no gradient through GELU(-100): they stay
    seen = []
    h = block[4].register_forward_hook(lambda m, i, o: seen.append(o.detach().clone()) if m.training else None)
    try: run = _fit(learn, tmp_path/'run')
    finally: h.remove()
    o = torch.cat([t.reshape(-1, t.shape[-1]) for t in seen])                 # every training output of the GELU, by channel
    oracle = ((o.amax(0) - o.amin(0)) == 0).nonzero().flatten().tolist()
    assert len(oracle) == 300
    for layer in ('features.1.0.block.3', 'features.1.0.block.4'):
        a = run.stats(layer)[0]
        assert (a['units'], a['unit_dim'], a['dead_rule'], a['dead_units']) == (384, 3, 'constant', oracle), layer
    dead = [a for a in run.epochs[0]['alerts'] if a['kind'] == 'dead']
    assert dead and dead[0]['layer'] == 'features.1.0.block.3' and 'did not vary' in dead[0]['message']

HEALTHY = {'convnext': convnext, 'swin': swin, 'small_vit': small_vit, 'efficientnet': efficientnet, 'mobilenet': mobilenet,
           'fastai_vision': fastai_vision, 'timm_resnet': timm_resnet, 'timm_vit': timm_vit, 'bert': bert, 'gpt2': gpt2,
           **{k: ZOO[k] for k in ('resnet18_tv', 'tabular', 'text_classifier', 'language_model', 'unet')}}

@pytest.mark.parametrize('seed', [0, 1])
@pytest.mark.parametrize('name', HEALTHY)
def test_no_alerts_on_healthy_training(name, seed, tmp_path):
    "Real architectures with random weights (torchvision, timm, Hugging Face, fastai), 2 epochs at a healthy learning rate: no alert (an LSTM's tanh units that stay negative are not dead)"
    torch.manual_seed(seed)
    learn = HEALTHY[name]()
    run = _fit(learn, tmp_path/'run', n=2)
    assert [a['message'] for e in run.epochs for a in e['alerts']] == []

FIRST_ONLY = {'timm_resnet': ('layer1.0.bn2', 'layer1.0.bn1.weight'), 'small_vit': ('heads.head', 'encoder.ln.weight'),
              'bert': ('model.bert.embeddings.token_type_embeddings', None)}

@pytest.mark.parametrize('name', FIRST_ONLY)
def test_no_alerts_when_each_epoch_samples_one_batch(name, tmp_path):
    "Epochs of 2 batches with `every=2` (as the default 10 samples an epoch of 10 or fewer): the first step behind a zero-initialised layer, and BERT's token type within one batch, raise nothing"
    torch.manual_seed(0)
    learn = HEALTHY[name]()
    run = _fit(learn, tmp_path/'run', n=2, every=2)
    layer,param = FIRST_ONLY[name]
    a = run.stats(layer)[0]                                  # what the rules saw: wholly constant in its only call
    assert (a['calls'], a['dead_rule'], a['dead_frac']) == (1, 'constant', 1.), a
    if param:                                                # no gradient reached it yet, so it did not move
        g,w = run.stats(param, 'grad')[0],run.stats(param, 'weight')[0]
        assert (g['norm'], w['update_max'], w['requires_grad']) == (0, 0, True), (g, w)
    assert [a['message'] for e in run.epochs for a in e['alerts']] == []

class _PoisonAt(Callback):
    "Put a NaN in weight `name` before training batch `it` of epoch `epoch` (0-based)"
    order = 0
    def __init__(self, param, epoch=1, it=0): self.param,self.at_epoch,self.at_iter = param,epoch,it
    def before_batch(self):
        if self.training and self.learn.epoch == self.at_epoch and self.learn.iter == self.at_iter:
            with torch.no_grad(): self.learn.model.get_parameter(self.param).view(-1)[0] = math.nan

def test_nan_run_alerts_once_at_the_first_output(tmp_path):
    "A ViT whose patch projection turns NaN: the alert names `conv_proj` (not the model, which holds `class_token` and returns last), and nothing else fires"
    learn = small_vit()
    learn.add_cb(_PoisonAt('conv_proj.weight'))
    run = _fit(learn, tmp_path/'run', n=2)
    assert run.epochs[0]['alerts'] == []
    alerts = run.epochs[1]['alerts']
    assert {a['kind'] for a in alerts} == {'nonfinite'}, [a['message'] for a in alerts]
    act = next(a for a in alerts if a['stat'] == 'act')
    assert act['layer'] == 'conv_proj', act['message']
    op = next(a for a in alerts if a['stat'] == 'op')                        # the batch run again: the weight that held it
    assert op['layer'] == 'conv_proj' and op['param'] == 'conv_proj.weight' and op['hint'], op['message']
    live = [a for a in run.meta.get('live_alerts', []) if a.get('stat') == 'act']
    assert live and live[0]['layer'] == 'conv_proj' and live[0]['epoch'] == 2

def test_each_call_of_a_module_is_its_own_layer(tmp_path):
    "torchvision's `BasicBlock.relu` runs twice: with `layer2.0.bn1.bias = -100` its first call is dead and named first, its second alive, each on its own row in the epoch file, the tree, the steps and the history"
    learn = ZOO['resnet18_tv']()
    with torch.no_grad(): learn.model.layer2[0].bn1.bias.fill_(-100.)
    run = _fit(learn, tmp_path/'run')
    first,second = run.stats('layer2.0.relu')[0],run.stats('layer2.0.relu#2')[0]
    assert (first['call'], first['dead_frac'], second['call'], second['dead_frac']) == (1, 1.0, 2, 0.0), (first, second)
    assert first['calls'] == second['calls'] == len(learn.dls.train), (first['calls'], second['calls'])   # one call each a batch
    alerts = run.epochs[0]['alerts']
    assert (alerts[0]['kind'], alerts[0]['layer']) == ('dead', 'layer2.0.relu'), [a['message'] for a in alerts]
    assert '(its first call)' in alerts[0]['message'] and 'frozen' not in {a['kind'] for a in alerts}   # bn1's zero gradient is not a frozen layer
    node = next(n for n in _nodes(run.epochs[0]['tree']) if n.get('path') == 'layer2.0.relu')
    assert [(c['type'], c['name'], c['path']) for c in node['nodes']] == [('Call', 'call 2', 'layer2.0.relu#2')]
    steps = run.query_steps(layers='layer2.0.relu#2', stats='silent_frac', kinds='act')
    assert len(steps) == len(learn.dls.train) and (steps.value == 0).all(), steps
    assert (run.query_steps(layers='layer2.0.relu', stats='silent_frac', kinds='act').value == 1).all()
    (epoch,st), = node_history(run.path, ['layer2.0.relu#2'])['layer2.0.relu#2']
    assert (epoch, st['act']['dead_frac']) == (1, 0.0), st

def _nodes(d):
    yield d
    for c in d.get('nodes', []): yield from _nodes(c)

def test_calls_with_different_units(tmp_path):
    "fastai's tabular model shares one ReLU between blocks of 20 and 10 features: each call counts its own units (a hook's oracle), with no 'unit count changed'"
    learn = ZOO['tabular']()
    relu = learn.model.layers[0][1]
    assert relu is learn.model.layers[1][1]
    seen = []
    h = relu.register_forward_hook(lambda m, i, o: seen.append(o.shape[-1]))
    try: run = _fit(learn, tmp_path/'run', preflight=False)   # the oracle counts the fit's forwards, not preflight's
    finally: h.remove()
    k = len(seen) // (len(learn.dls.train) + len(learn.dls.valid))   # calls a forward
    assert k == 2, seen
    sts = [run.stats(p)[0] for p in ('layers.0.1', 'layers.0.1#2')]
    assert [(s['units'], s['call']) for s in sts] == [(seen[0], 1), (seen[1], 2)] and not any('unsupported' in s for s in sts), sts
    assert [a['message'] for a in run.epochs[0]['alerts']] == []

class _FirstStepTo(Callback):
    "After the first training step, before the explorer reads it, set parameter `param` to `value`: a step that sent it far away"
    order = 0
    def __init__(self, param, value): self.param,self.value,self.done = param,value,False
    def after_step(self):
        if self.done: return
        with torch.no_grad(): self.learn.model.get_parameter(self.param).fill_(self.value)
        self.done = True

def test_a_bias_at_zero_that_moved_once_is_not_frozen(tmp_path):
    "A Linear's bias starts at 0 and its first step sends it to -10,000, killing the ReLU after it: that step has no update ratio (|w| was 0) and every later gradient is 0, so the bias is not 'frozen' in epoch 1; in epoch 2 the dead ReLU is named"
    learn = Learner(digits_dls(), nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)),
                    loss_func=nn.CrossEntropyLoss(), opt_func=SGD, cbs=_FirstStepTo('1.bias', -1e4))   # no momentum: a zero gradient moves nothing
    nn.init.zeros_(learn.model[1].bias)
    run = _fit(learn, tmp_path/'run', n=2)
    w,g = run.stats('1.bias', 'weight')[0],run.stats('1.bias', 'grad')[0]
    assert (w['update_max'], w['update_moved']) == (0, 1) and g['max_abs'] > 0, (w, g)   # measured: no change; but it moved once
    assert [a['message'] for a in run.epochs[0]['alerts']] == []
    alerts = run.epochs[1]['alerts']
    assert (alerts[0]['kind'], alerts[0]['layer'], alerts[0]['value']) == ('dead', '2', 1.0), [a['message'] for a in alerts]
    assert 'frozen' not in {a['kind'] for a in alerts}, [a['message'] for a in alerts]

def test_run_alerts_by_step_likeliest_cause_first(tmp_path):
    """Issue 46: `run.alerts` in the order things happened (epoch, then step), and within a step the likeliest cause first
    (`RANK`). The demo's CNN at lr 1e4: NaN from epoch 1, the learning rate named at each epoch's end, where the
    NaN of a layer found in epoch 1 was listed again after it"""
    from fastexplorer.formats import alert_rank
    torch.manual_seed(0)
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'r', every=2))
    with learn.no_bar(), learn.no_logging(): learn.fit(3, 1e4)
    al = load_run(tmp_path/'r').alerts
    rows = list(zip(al.epoch, al.step, al.kind.map(alert_rank)))
    assert rows == sorted(rows), al[['epoch', 'step', 'source', 'kind', 'layer']]
    assert {'nonfinite', 'lr_too_high'} <= set(al.kind), al[['epoch', 'step', 'source', 'kind', 'layer']]
    assert any(g.kind.nunique() > 1 for _,g in al.groupby(['epoch', 'step'])), al   # a step with several kinds: ranked
