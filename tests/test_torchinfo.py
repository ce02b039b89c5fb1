"`represent` and `Learner.to_representation` against `torchinfo.summary` and an independent oracle, on the kinds of models torchinfo's own tests use."
import copy, dataclasses
from collections import defaultdict
import pytest, torch, torchinfo
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence
from fastexplorer.all import represent, first_shape, to_model_device
from untouched import Untouched
from torchinfo_zoo import BUILDERS, CNN, Case, _counts, _randn
import zoo

pytestmark = pytest.mark.filterwarnings('ignore:.*torch.jit.script.*:FutureWarning')

# ---- the independent oracle: plain hooks on a deep copy, and `model.parameters()` ----
def _shape(o, depth=0):
    "The first tensor shape in `o` (a PackedSequence by its data), searching sequences, mappings, dataclasses and objects in order"
    if isinstance(o, PackedSequence): return list(o.data.shape)
    if isinstance(o, torch.Tensor): return list(o.shape)
    if depth > 8 or o is None or isinstance(o, (str, bytes, int, float)): return None
    if isinstance(o, dict): vals = list(o.values())
    elif dataclasses.is_dataclass(o): vals = [getattr(o, f.name) for f in dataclasses.fields(o)]
    elif isinstance(o, (list, tuple)): vals = list(o)
    else: vals = [v for k,v in vars(o).items() if not k.startswith('_')] if hasattr(o, '__dict__') else []   # ImageList
    for v in vals:
        if (s := _shape(v, depth+1)) is not None: return s
    return None

def _build(builder)->Case:
    "The case `builder` makes, its weights seeded (the same each time), the global RNG state left as it was"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return builder()

def _copy_paths(model:nn.Module, builder):
    "A second, identical build of `model` (a pruned model cannot be deep-copied), and `{id(its module): first path in model}`"
    cp = _build(builder).model
    paths = {}
    for (p,_),(_,c) in zip(model.named_modules(remove_duplicate=False), cp.named_modules(remove_duplicate=False)): paths.setdefault(id(c), p)
    return cp, paths

def _inputs(case:Case)->tuple:
    "`case`'s positional inputs; from `input_size`, zeros of its shapes and dtypes"
    if case.input_size is None: return case.args
    sizes = case.input_size if isinstance(case.input_size, list) else [case.input_size]
    dts = case.dtypes or [torch.float32] * len(sizes)
    return tuple(torch.zeros(s, dtype=d) for s,d in zip(sizes, dts))

def _oracle(case:Case, builder)->tuple:
    "`({path: [first output shape of each call]}, (total, trainable) once materialised)` from hooks on a copy run in eval"
    cp,paths = _copy_paths(case.model, builder)
    res = defaultdict(list)
    def hook(m, i, o): res[paths[id(m)]].append(_shape(o))
    hs = [c.register_forward_hook(hook) for c in cp.modules() if not isinstance(c, torch.jit.ScriptModule)]
    cp.eval()
    try:
        with torch.no_grad(): cp(*_inputs(case), **case.kwargs)
    finally:
        for h in hs: h.remove()
    return dict(res), _counts(cp)

def _lazy(t): return isinstance(t, nn.parameter.UninitializedTensorMixin)

def _eager_counts(m:nn.Module)->tuple:
    "(total, trainable) of the distinct, materialised parameters of `m`: each tied tensor once, lazy ones not yet known"
    ps = [p for p in {id(p): p for p in m.parameters()}.values() if not _lazy(p)]
    return sum(p.numel() for p in ps), sum(p.numel() for p in ps if p.requires_grad)

def _torchinfo(case:Case, builder):
    "`torchinfo.summary` on a copy of the model, the copy, and the copy's module paths"
    cp,paths = _copy_paths(case.model, builder)
    if case.input_size is not None:
        s = torchinfo.summary(cp, input_size=case.input_size, dtypes=case.dtypes, device='cpu', verbose=0)
    else: s = torchinfo.summary(cp, input_data=list(case.args), device='cpu', verbose=0, **case.kwargs)
    return s, cp, paths

# ---- one probe per case ----
@pytest.fixture(scope='module', params=BUILDERS, ids=lambda f: f.__name__)
def probed(request):
    "A case built with seeded weights, its representation, the untouched check's failure (or `None`) and the oracle"
    case = _build(request.param)
    u = Untouched(case.model)
    if case.input_size is not None: r = represent(case.model, input_size=case.input_size, dtypes=case.dtypes)
    else: r = represent(case.model, *case.args, **case.kwargs)
    try: u.check(); err = None
    except AssertionError as e: err = e
    return case, r, err, _oracle(case, request.param), request.param

def test_untouched(probed):
    "`represent` leaves the model, its hooks and modes, and the RNG states as they were"
    _,_,err,_,_ = probed
    assert err is None, err

def test_params_exact(probed):
    "The model's params and trainable equal the distinct parameters' count (tied once, a pruned `weight_orig` whole)"
    case,r,_,_,_ = probed
    x = r.find('').xtra
    assert (x['params'], x['trainable']) == _eager_counts(case.model), f"root: {x['params']}, {x['trainable']}"
    assert (r.data.xtra['params'], r.data.xtra['trainable']) == (x['params'], x['trainable']), "the Probe root's totals"

def _buffers(m:nn.Module)->int: return sum(b.numel() for b in {id(b): b for b in m.buffers()}.values() if not _lazy(b))

def test_every_module_counted(probed):
    "Every module's node counts the distinct parameters and buffers of its own subtree (a pruning mask is a buffer)"
    case,r,_,_,_ = probed
    for p,m in case.model.named_modules():
        x = r.find(p).xtra
        assert (x['params'], x['trainable'], x['buffers']) == (*_eager_counts(m), _buffers(m)), \
            f"{p or 'root'} ({type(m).__name__}): {x['params']}, {x['trainable']}, {x['buffers']}"

def test_lazy_materialised(probed):
    "A lazy module's node carries the count its copy materialised, which the lazy model itself still cannot say"
    case,r,_,(_,total),builder = probed
    lazy = {p: m for p,m in case.model.named_modules() if any(_lazy(t) for t in m.parameters(recurse=False))}
    if not lazy: pytest.skip('no lazy module')
    assert all(_lazy(t) for m in lazy.values() for t in m.parameters(recurse=False)), "the model was materialised"
    cp = _build(builder).model
    with torch.no_grad(): cp(*_inputs(case), **case.kwargs)
    cmods = dict(cp.named_modules())
    for p in lazy: assert r.find(p).xtra['materialised'] == _counts(cmods[p])[0], p
    assert r.find('').xtra['params'] + sum(r.find(p).xtra['materialised'] for p in lazy) == total[0]

def test_shapes_match_oracle(probed):
    "Every eager module's recorded calls and output shapes equal those the oracle's own hooks saw"
    case,r,_,(shapes,_),builder = probed
    assert shapes or isinstance(case.model, torch.jit.ScriptModule), "the oracle saw no module run"
    for p,want in shapes.items():
        x = r.find(p).xtra
        assert x['calls'] == len(want), f"{p or 'root'}: {x['calls']} calls, the oracle saw {len(want)}"
        got = [first_shape(o) for o in x['outputs']]
        assert got == want[:len(got)], f"{p or 'root'}: {got} != {want}"
        assert x['shape'] == want[0]
    scripted = [p for p,m in case.model.named_modules() if isinstance(m, torch.jit.ScriptModule)]
    for p in scripted: assert r.find(p).xtra.get('scripted') and r.find(p).xtra.get('shape') is None, p
    inside = lambda p: any(p == q or p.startswith(q + '.') for q in scripted)
    for p,_ in case.model.named_modules():     # what the oracle never saw run, the probe did not record
        if p not in shapes and not inside(p): assert r.find(p).xtra['calls'] == 0, f"{p or 'root'} recorded as called"

def test_io_fields(probed):
    "`describe` on the Input and Output nodes keeps containers and field names (dict, None, str, namedtuple, dataclass)"
    case,r,_,_,_ = probed
    inp,_,out = r.data.nodes
    if case.input_size is not None:
        sizes = case.input_size if isinstance(case.input_size, list) else [case.input_size]
        dts = [str(d).removeprefix('torch.') for d in (case.dtypes or [torch.float32]*len(sizes))]
        assert inp.xtra['inputs'] == [[{'shape': list(s), 'dtype': d} for s,d in zip(sizes, dts)]]
    if case.io is None:
        if case.input_size is None: pytest.skip('plain tensors in and out: the shape tests cover them')
        return
    want_in,want_out = case.io
    assert inp.xtra['inputs'] == [want_in], inp.xtra['inputs']
    assert out.xtra['outputs'] == [want_out], out.xtra['outputs']
    assert r.data.xtra.get('kwargs', []) == list(case.kwargs)

def test_against_torchinfo(probed):
    "torchinfo's totals and every output shape it reports equal ours, but where the case says why torchinfo differs"
    case,r,_,(shapes,total),builder = probed
    if case.ti_fails:   # torchinfo cannot run: the case says why; the oracle tests above are this model's check
        with pytest.raises((TypeError, RuntimeError, AttributeError)): _torchinfo(case, builder)
        return
    s,cp,paths = _torchinfo(case, builder)
    oracle = total                               # the copy's distinct parameters once run (lazy ones materialised)
    want = case.ti_params(cp) if case.ti_params else oracle
    assert (s.total_params, s.trainable_params) == want, f"torchinfo counts {s.total_params}, {s.trainable_params}; {case.ti_params_why}"
    if case.ti_params: assert want != oracle, f"the case says torchinfo's totals differ from {oracle}, and they do not"
    rows = defaultdict(list)
    for o in s.summary_list:
        if o.executed: rows[paths[id(o.module)]].append(o)
    compared,differ = 0,set()
    for p,infos in rows.items():
        got = [first_shape(o) for o in r.find(p).xtra['outputs']]
        assert len(infos) == len(got), f"{p or 'root'}: torchinfo has {len(infos)} rows, we recorded {len(got)} calls"
        for o,g in zip(infos, got):
            if not o.output_size: continue       # torchinfo shows no shape (a `None` output)
            if o.output_size != g: differ.add(p)
            else: compared += 1
    assert compared or not shapes, "no shape compared"
    assert differ == set(case.ti_shapes), f"torchinfo's shapes differ at {sorted(differ)}; the case says {case.ti_shapes}"
    for p in differ: assert [first_shape(o) for o in r.find(p).xtra['outputs']] == shapes[p][:16], p

def test_batch_dim_convention():
    "torchinfo's `batch_dim=0` adds a batch of 1 to `input_size`: `represent` takes the batch in `input_size`, as with `batch_dim=None`"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = CNN()
    r = represent(m, input_size=(1, 3, 8, 8))
    s = torchinfo.summary(m, input_size=(3, 8, 8), batch_dim=0, device='cpu', verbose=0)
    paths = {id(o): p for p,o in m.named_modules()}
    rows = [(paths[id(o.module)], o.output_size) for o in s.summary_list]
    assert rows == [(p, r.find(p).xtra['shape']) for p,_ in rows] and rows[-1] == ('fc', [1, 3]), rows
    assert r.data.nodes[0].xtra['shape'] == [1, 3, 8, 8] and (s.total_params, s.trainable_params) == _counts(m)

def test_packed_sequence_input_keeps_batch_sizes_on_cpu():
    "A PackedSequence input moves as `PackedSequence.to` moves it: its `batch_sizes` stay on the CPU, as the LSTM needs on a GPU"
    ps = pack_padded_sequence(_randn(3, 5, 2), torch.tensor([5, 3, 2]), batch_first=True)
    o = to_model_device(ps, torch.device('meta'))    # the meta device stands in for a GPU: the rule is the same
    assert type(o) is PackedSequence and o.data.is_meta and o.batch_sizes.device.type == 'cpu', o
    assert torch.equal(o.batch_sizes, ps.batch_sizes)

# ---- both entry points ----
@pytest.mark.parametrize('name', ['two_inputs', 'packed'])
def test_learner_and_represent_agree(name):
    "`represent(model, *xb)` and `learn.to_representation(b)` give the same tree below the root"
    learn = zoo.ZOO[name]()
    b = learn.dls.valid.one_batch()
    xb = b[:-1]                                  # these zoo models take every item but the last, the target
    u = Untouched(learn.model)
    a = represent(learn.model, *xb)
    l = learn.to_representation(b)
    u.check()
    assert a.data.nodes[1].get_dict() == l.data.nodes[1].get_dict()
    assert a.data.nodes[0].get_dict() == l.data.nodes[0].get_dict() and a.data.nodes[2].get_dict() == l.data.nodes[2].get_dict()
    assert (l.data.type, a.data.type) == ('Learner', 'Probe')
