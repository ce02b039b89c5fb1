"""The explorer on the model's own device (issue 35): each test runs on the CPU everywhere and on CUDA where a GPU is,
so that the CUDA paths (the device's random state, channels-last, the landscape's restore, NCCL) run as users run them."""
import socket, subprocess, sys
from pathlib import Path
import pytest, torch, torchvision
from fastai.callback.progress import *   # noqa: F401,F403  (Learner.no_bar)
from fastexplorer.all import *
from zoo import learner, images

CUDA = pytest.param('cuda', marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')])
DEVICES = ['cpu', CUDA]

def _rng(dev:str): return torch.cuda.get_rng_state() if dev == 'cuda' else torch.get_rng_state()

def _on(learn, dev:str, channels_last:bool=False):
    learn.dls.to(dev); learn.model.to(dev)
    if channels_last: learn.model.to(memory_format=torch.channels_last)
    return learn

@pytest.mark.parametrize('dev', DEVICES)
def test_probe_leaves_the_model_on_its_device(dev):
    "The probe runs where the model is, and leaves its device, mode, weights and that device's random state as they were"
    learn = _on(learner(torchvision.models.resnet18(num_classes=10), images()), dev)
    learn.model.train()
    w = {k: v.clone() for k,v in learn.model.state_dict().items()}
    rng = _rng(dev)
    rep = learn.to_representation()
    assert rep.data is not None
    assert {p.device.type for p in learn.model.parameters()} == {dev} and learn.model.training
    assert torch.equal(rng, _rng(dev)), "the device's random state is the one before the probe"
    assert all(torch.equal(w[k], v) for k,v in learn.model.state_dict().items()), "weights and BatchNorm statistics kept"

@pytest.mark.parametrize('dev', DEVICES)
def test_channels_last_fit(tmp_path, dev):
    "A channels-last CNN records the same layers, finite statistics, and stays channels-last"
    learn = _on(learner(torchvision.models.resnet18(num_classes=10), images(n=16)), dev, channels_last=True)
    learn.add_cb(ExplorerCallback(tmp_path/'run', every=1, valid=True))
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3)
    assert learn.model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    st = node_stats(load_run(tmp_path/'run').epochs[0])
    acts = {k: v['act'] for k,v in st.items() if v.get('act')}
    assert len(acts) > 40 and all(a['nan'] == 0 and a['inf'] == 0 for a in acts.values())
    assert st['conv1.weight']['grad']['steps'] == 4

@pytest.mark.parametrize('dev', DEVICES)
def test_landscape_restores_bitwise(dev):
    "After the landscape, every weight and buffer is bit for bit what it was, on the model's device"
    learn = _on(learner(torchvision.models.resnet18(num_classes=10), images()), dev)
    before = {k: v.clone() for k,v in learn.model.state_dict().items()}
    rng = _rng(dev)
    learn.loss_landscape(n=3, n_batches=1, seed=0, progress=False)
    after = learn.model.state_dict()
    assert [k for k in before if not torch.equal(before[k], after[k])] == []
    assert {p.device.type for p in learn.model.parameters()} == {dev} and torch.equal(rng, _rng(dev))

@pytest.mark.parametrize('dev', DEVICES)
def test_probe_and_preflight_compute_in_the_learners_precision(dev, request):
    "Under `to_bf16`, the probe and the preflight run the model in bfloat16, as its training steps do"
    import fastai.callback.fp16   # noqa: F401  (Learner.to_bf16)
    if dev == 'cpu': request.getfixturevalue('fastai_amp_on_cpu')
    learn = _on(learner(torchvision.models.resnet18(num_classes=10), images()), dev).to_bf16()
    seen = []
    h = learn.model.fc.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    try: v = learn.preflight(); learn.to_representation()
    finally: h.remove()
    assert len(seen) >= 3 and set(seen) == {torch.bfloat16}, seen
    assert not [x for x in v if x['severity'] == 'error'], v

def _free_port()->int:
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2 or not torch.distributed.is_nccl_available(), reason='needs 2 CUDA devices and NCCL')
def test_ddp_nccl(tmp_path):
    "Two processes on two GPUs under DDP with NCCL: one run, whose epoch holds both ranks' statistics"
    r = subprocess.run([sys.executable, str(Path(__file__).parent/'nccl_worker.py'), str(tmp_path), str(_free_port())],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (tmp_path/'run_rank1').exists(), "only rank 0 writes"
    run = load_run(tmp_path/'run')
    e = run.epochs[0]
    assert run.meta['status'] == 'finished' and e['ranks'] == 2, (run.meta['status'], e.get('ranks'))
    assert all(v['act']['nan'] == 0 for v in node_stats(e).values() if v.get('act'))
