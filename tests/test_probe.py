"The probe and `Learner.to_representation` on the model zoo: valid strict JSON, exact totals, the model untouched."
import json
from pathlib import Path
import pytest, torch
from torch import nn
from fastai.callback.hook import layer_info
from fastai.callback.progress import *   # noqa: F401,F403  (Learner.no_bar)
from fastexplorer.all import *
from zoo import ZOO, RAISES
from untouched import Untouched

GOLDEN = Path(__file__).parent/'golden'
NAMES = [n for n in ZOO if n not in RAISES]

def _strict(text):
    "Parse `text` as strict JSON: NaN and Infinity are rejected"
    def bad(c): raise ValueError(f"non-strict JSON constant {c}")
    return json.loads(text, parse_constant=bad)

def _oracle(model, trainable=False):
    ps = [p for p in set(model.parameters()) if not isinstance(p, nn.parameter.UninitializedParameter)]
    return sum(p.numel() for p in ps if p.requires_grad or not trainable)

@pytest.fixture(scope='module', params=NAMES)
def probed(request):
    learn = ZOO[request.param]()
    u = Untouched(learn.model)
    r = learn.to_representation()
    return request.param, learn, u, r

def test_json_validates(probed):
    "The representation is strict JSON that fits the shipped schema"
    name, _, _, r = probed
    doc = _strict(r.to_json())
    validate(doc)
    assert doc['schema'] == 'fastexplorer/representation' and doc['version'] == 1
    assert [n['type'] for n in doc['nodes']] == ['Input', 'Module' if doc['nodes'][1]['type'] == 'Module' else 'Sequential', 'Output']

def test_totals_exact(probed):
    "Root totals equal `sum(p.numel() for p in set(model.parameters()))`, trainable too"
    name, learn, _, r = probed
    m = r.find('')
    assert m.xtra['params'] == r.data.xtra['params'] == _oracle(learn.model), name
    assert m.xtra['trainable'] == _oracle(learn.model, trainable=True), name

def _buffers_oracle(m): return sum(b.numel() for b in set(m.buffers()) if not isinstance(b, nn.parameter.UninitializedBuffer))

def _bytes_oracle(m):
    ts = [t for t in set(m.parameters()) | set(m.buffers()) if not isinstance(t, nn.parameter.UninitializedTensorMixin)]
    return sum(t.numel() * t.element_size() for t in ts)

def test_every_module_counted(probed):
    "Every module's node counts the distinct parameters, trainable parameters, buffers and bytes of its subtree"
    name, learn, _, r = probed
    for n in r.find(''):
        if n.type == 'Parameter': continue
        x = n.xtra
        assert (x['params'], x['trainable'], x['buffers'], x['bytes']) == (
            _oracle(n.obj), _oracle(n.obj, trainable=True), _buffers_oracle(n.obj), _bytes_oracle(n.obj)), (name, n.path)

def test_untouched(probed):
    "Hooks, modes, tensors, parameters, attributes and RNG states are as they were"
    probed[2].check()

def test_every_module_has_a_node(probed):
    "Every path of `named_modules` and `named_parameters` is in the tree"
    name, learn, _, r = probed
    paths = {n.path for n in r}
    assert {p for p,_ in learn.model.named_modules()} <= paths
    assert {p for p,_ in learn.model.named_parameters()} <= paths

def _shapes(spec):
    "Just the shapes of a `describe` result, nested as fastai's `apply(lambda x: x.shape, o)` nests them"
    if isinstance(spec, dict) and 'shape' in spec: return tuple(spec['shape'])
    if isinstance(spec, list): return tuple(_shapes(o) for o in spec)
    if isinstance(spec, dict): return {k: _shapes(v) for k,v in spec.items()}
    return spec

def _fastai_shapes(s):
    if isinstance(s, torch.Size): return tuple(s)
    if isinstance(s, (tuple, list)): return tuple(_fastai_shapes(o) for o in s)
    if isinstance(s, dict): return {k: _fastai_shapes(v) for k,v in s.items()}
    return s

def _fastai_order(node):
    "Leaf nodes in the order of fastai's `flatten_model`: children, then parameters held directly (as `ParameterModule`s)"
    kids = [n for n in node.nodes if n.type != 'Parameter']
    if not kids: return [node]
    return [o for n in node.nodes for o in (_fastai_order(n) if n.type != 'Parameter' else [n])]

@pytest.mark.parametrize('name', NAMES)
def test_leaf_shapes_match_fastai(name):
    "Leaf output shapes equal fastai's `layer_info` on the same one-item batch, wherever fastai succeeds"
    ref = ZOO[name]()
    b = ref.dls.valid.one_batch()
    n = getattr(ref.dls, 'n_inp', len(b) - 1)
    xb = tuple(o[:1] for o in b[:n])
    try:
        with ref.no_bar(): info = layer_info(ref, *xb)
    except Exception as e: pytest.skip(f"fastai's layer_info fails on {name}: {type(e).__name__}")
    learn = ZOO[name]()
    r = learn.to_representation(xb + tuple(o[:1] for o in b[n:]))
    leaves = _fastai_order(r.find(''))
    assert len(leaves) == len(info), name
    for nd,res in zip(leaves, info):
        if res is None: continue   # fastai's hook never fired: a parameter held by a container, or a module not called
        typ,_,_,shape,_ = res
        if name == 'lazy' and nd.xtra['class'].startswith('Lazy'): continue   # fastai materialised it: class changed
        assert nd.xtra['class'] == typ, (name, nd.path)
        # fastai's hook keeps the last call of a module that runs several times (a resnet block's `relu`)
        assert _shapes(nd.xtra['outputs'][-1]) == _fastai_shapes(shape), (name, nd.path)

def test_raising_forward():
    "A forward that raises: a `RuntimeError` naming the module, chained to the cause, and the model restored"
    learn = ZOO['raises']()
    learn.model.train()
    u = Untouched(learn.model)
    with pytest.raises(RuntimeError, match=r"raised inside `fc` \(Linear\); the last module to finish was `bn`") as e:
        learn.to_representation()
    assert isinstance(e.value.__cause__, RuntimeError) and 'mat1' in str(e.value.__cause__)
    u.check()

def test_interrupt_restores():
    "A `KeyboardInterrupt` mid-forward propagates unchanged and the model is restored"
    learn = ZOO['frozen_bn']()
    def stop(m, i, o): raise KeyboardInterrupt
    h = learn.model[3].register_forward_hook(stop)
    u = Untouched(learn.model)
    with pytest.raises(KeyboardInterrupt): learn.to_representation()
    u.check()
    h.remove()

def test_shared_module_and_tied_weights():
    "A module under two parents and tied weights appear under both, share one record and are counted once"
    learn = ZOO['two_parents']()
    r = learn.to_representation()
    a, b = r.find('body.0'), r.find('other.0')
    assert a.obj is b.obj and b.xtra['shared_with'] == 'body.0'
    assert a.xtra['calls'] == b.xtra['calls'] == 2
    assert r.find('dec.weight').xtra['shared_with'] == 'emb.weight'
    assert r.find('').xtra['params'] == _oracle(learn.model) < sum(p.numel() for _,p in learn.model.named_parameters(remove_duplicate=False))
    assert r.find('scale').type == 'Parameter' and r.find('scale').xtra['numel'] == 1

def test_called_twice_and_outputs():
    "Tuple, dict and `None` outputs are described; a module called twice has both calls and execution-order links"
    r = ZOO['awkward']().to_representation()
    lin = r.find('lin')
    assert lin.xtra['calls'] == 2 and len(lin.xtra['outputs']) == 2
    assert r.find('tup').xtra['outputs'][0] == [{'shape': [4, 6], 'dtype': 'float32'},
                                                [{'shape': [4], 'dtype': 'float32'}, {'shape': [4], 'dtype': 'float32'}]]
    assert r.find('dic').xtra['outputs'][0]['norm'] == {'shape': [4], 'dtype': 'float32'}
    assert r.find('none').xtra['outputs'] == [None] and r.find('none').xtra['shape'] is None
    idx = {n.name: n.index for n in r.find('').nodes}
    assert r.find('').links == [{'source': idx['lin'], 'target': idx['tup']}, {'source': idx['tup'], 'target': idx['dic']},
                                {'source': idx['dic'], 'target': idx['none']}, {'source': idx['none'], 'target': idx['lin']},
                                {'source': idx['lin'], 'target': idx['head']}]

def test_packed_sequence():
    "An LSTM fed a `PackedSequence` reports the data shape and the batch size, not `batch_sizes`"
    r = ZOO['packed']().to_representation()
    packed = r.find('lstm').xtra['inputs'][0][0]
    assert packed['packed'] and packed['batch_size'] == 4 and packed['shape'][1] == 8

def test_lazy_module_left_lazy():
    "A lazy module is probed through a copy: the original stays uninitialised and its parameters uncounted"
    learn = ZOO['lazy']()
    r = learn.to_representation()
    assert isinstance(learn.model[1], nn.LazyLinear)
    n = r.find('1')
    assert n.xtra['lazy'] and n.xtra['params'] == 0 and n.xtra['shape'] == [4, 5]
    assert r.find('1.weight').xtra['shape'] is None

def test_two_inputs():
    "`n_inp=2` with a bool input: both inputs recorded, with their dtypes"
    r = ZOO['two_inputs']().to_representation()
    assert r.data.xtra['n_inp'] == 2
    assert [o['dtype'] for o in r.data.nodes[0].xtra['inputs'][0]] == ['float32', 'bool']

def test_partial_freeze_trainable_exact():
    "Under fastai's `freeze()` (BatchNorm stays trainable) the trainable count is exact"
    learn = ZOO['unet']()
    learn.freeze()
    r = learn.to_representation()
    assert r.data.xtra['trainable'] == _oracle(learn.model, trainable=True) < r.data.xtra['params']

def test_default_batch_leaves_dataloaders():
    "The default batch comes from the validation loader, whose random generator is left as it was"
    learn = ZOO['frozen_bn']()
    states = [dl.rng.getstate() for dl in learn.dls.loaders]
    r = learn.to_representation()
    assert [dl.rng.getstate() for dl in learn.dls.loaders] == states
    assert r.data.nodes[0].xtra['shape'] == [4, 3, 32, 32]

def test_structure_only():
    "`nn.Module.to_representation` builds the tree without running the model"
    m = ZOO['two_parents']().model
    calls = []
    h = m.register_forward_hook(lambda *a: calls.append(1))
    node = m.to_representation()
    h.remove()
    assert not calls and node.xtra['params'] == _oracle(m) and 'shape' not in node.xtra

@pytest.mark.parametrize('name', ['awkward', 'two_parents', 'frozen_bn', 'tabular', 'packed'])
def test_golden(name, update_golden):
    "The JSON of small zoo models matches the golden files (`pytest --update-golden` rewrites them)"
    torch.manual_seed(0)
    doc = _strict(ZOO[name]().to_representation().to_json())
    f = GOLDEN/f'{name}.json'
    if update_golden: f.write_text(json.dumps(doc, indent=1) + '\n')
    assert doc == json.loads(f.read_text()), f"{name} differs from {f}; rerun with --update-golden if intended"

def test_batch_moved_to_model_device():
    "The batch goes to the model's device and the model stays there (a `meta` model stands in for a GPU here)"
    from zoo import learner, images
    import torchvision
    m = torchvision.models.resnet18(num_classes=10).to('meta')
    learn = learner(m, images())
    r = learn.to_representation()
    assert r.data.xtra['device'] == 'meta' and r.find('fc').xtra['shape'] == [4, 10]
    assert all(p.device.type == 'meta' for p in m.parameters()) and learn.dls.valid.one_batch()[0].device.type == 'cpu'

def test_data_parallel_paths_unprefixed():
    "A `DataParallel` wrapper is looked through: paths have no `module.` prefix"
    from zoo import learner, images
    import torchvision
    learn = learner(nn.DataParallel(torchvision.models.resnet18(num_classes=10)), images())
    u = Untouched(learn.model)
    r = learn.to_representation()
    assert r.find('').name == 'ResNet' and r.find('layer1.0.conv1').xtra['calls'] == 1
    assert not any((n.path or '').startswith('module') for n in r)
    u.check()

# ---- TorchScript ----

def _seq(): return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))

class _ScriptedBody(nn.Module):
    "An eager model whose body is scripted and whose head is not"
    def __init__(self):
        super().__init__()
        self.body = torch.jit.script(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))
    def forward(self, x): return self.head(self.body(x))

SCRIPTED = {'scripted': lambda: torch.jit.script(_seq()), 'traced': lambda: torch.jit.trace(_seq().eval(), torch.randn(2, 3, 32, 32)),
            'scripted_body': _ScriptedBody}

@pytest.mark.parametrize('name', SCRIPTED)
def test_torchscript_is_walked_not_hooked(name):
    "TorchScript takes no Python hooks: a scripted, a traced, and an eager model with a scripted body are probed where they can be, counted from their structure, marked 'shapes not recorded', and left in their modes (training, with one BatchNorm in eval)"
    from zoo import learner, images
    model = SCRIPTED[name]()
    model.train()
    bn = next(m for m in model.modules() if 'BatchNorm' in getattr(m, 'original_name', type(m).__name__))
    bn.training = False
    learn = learner(model, images())
    u = Untouched(model)
    r = learn.to_representation()
    u.check()                                                        # the probe runs in eval: every flag put back, ScriptModules too
    validate(_strict(r.to_json()))
    assert r.find('').xtra['params'] == _oracle(model)
    marked = [n for n in r if n.xtra.get('scripted')]
    assert marked and all(n.xtra.get('shape') is None and 'calls' not in n.xtra for n in marked), [n.path for n in marked]
    assert {n.xtra['class'] for n in marked} >= {'Conv2d', 'BatchNorm2d'}                 # their own classes, not RecursiveScriptModule
    assert r.data.nodes[2].xtra['shape'] == [4, 10]                                      # the output is known all the same
    if name == 'scripted_body': assert r.find('head.2').xtra['shape'] == [4, 10] and r.find('head.2').xtra['calls'] == 1

def test_torchscript_body_trains_with_the_callback(tmp_path):
    "A fit with `ExplorerCallback` on an eager model with a scripted body: the eager layers are recorded, the scripted ones left out by default (no hooks there), and the modes kept"
    from zoo import learner, images
    learn = learner(_ScriptedBody(), images())
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3, cbs=ExplorerCallback(tmp_path/'run', every=1))
    run = load_run(tmp_path/'run')
    assert run.stats('head.2')[0]['calls'] == len(learn.dls.train) and run.stats('body.0')[0] is None
    assert run.meta['status'] == 'finished'

@pytest.mark.parametrize('index,expect', [(None, 3), (1, 1)])
def test_preserved_rng_forks_the_cuda_device_it_is_given(monkeypatch, index, expect):
    "The CUDA branch of `preserved_rng`, run on any machine: it forks the random state of the model's device (the current one when the device has no index)"
    import fastexplorer.state as S
    seen = []
    class Fork:
        def __init__(self, devices, device_type): seen.append((devices, device_type))
        def __enter__(self): return self
        def __exit__(self, *a): return False
    monkeypatch.setattr(torch.cuda, 'current_device', lambda: 3)
    monkeypatch.setattr(S.torch.random, 'fork_rng', Fork)
    with S.preserved_rng(torch.device('cuda', index) if index is not None else torch.device('cuda')): pass
    assert seen == [([expect], 'cuda')]
