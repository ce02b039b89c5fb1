"""Two CPU processes (gloo) training with `ExplorerCallback`, launched by `tests/test_scale.py` as a subprocess.

`python tests/ddp_worker.py OUT PORT` trains under `learn.distrib_ctx()` (DDP) into `OUT/run`; then each rank on its
own, uneven data into `OUT/uneven`; then under DDP into `OUT/run` again, which rank 0 cannot open (each rank notes its
error in `OUT/start/`); then under DDP into `OUT/drift`, where rank 1 alone edits a weight; then under DDP again into `OUT/raised`, where rank 1 raises mid-epoch (so the
launch ends with that error, once the rest is written). One launch, because starting two processes is the slow part.
The model and data helpers are imported by the test too, for the single-process run it compares against."""
import contextlib, datetime, os, sys
from pathlib import Path
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch import nn

N,BS = 64,8   # training items; batch size per rank (the single process takes 2*BS)

def data():
    "Synthetic 1×6×6 images and a regression target, the same in every process"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N + 16, 1, 6, 6, generator=g)
    return x, x.mean((1, 2, 3))[:, None] * 3 + 1

class Net(nn.Module):
    "A small CNN without BatchNorm (whose batch statistics would differ between one big batch and two halves)"
    def __init__(self):
        super().__init__()
        self.conv,self.act = nn.Conv2d(1, 4, 3, padding=1),nn.ReLU()
        self.lin = nn.Linear(4 * 36, 1)
        self.side,self.use_side = nn.Linear(4 * 36, 3),True   # a layer only some ranks call (uneven test)
        with torch.no_grad(): self.conv.bias[0] = -50.   # channel 0 never fires: a dead unit on every rank
    def forward(self, x):
        h = self.act(self.conv(x)).flatten(1)
        if self.use_side: h = h + 0 * self.side(h).sum(1, keepdim=True)
        return self.lin(h)

def pos_frac(t): return (t > 0).float().mean()
CUSTOM = {'pos_frac': pos_frac}   # a custom statistic of outputs, reduced over the ranks too

def learner(order, bs, path, valid=True, **kw):
    "A `Learner` over the training items in `order` (not shuffled), with `ExplorerCallback` writing to `path`"
    from fastai.basics import Learner, DataLoaders, DataLoader, MSELossFlat
    from fastexplorer.callback import ExplorerCallback
    x,y = data()
    trn = [(x[i], y[i]) for i in order]
    val = [(x[N + i], y[N + i]) for i in range(16)]
    dls = DataLoaders(DataLoader(trn, bs=bs, shuffle=False), DataLoader(val, bs=bs), device='cpu')
    torch.manual_seed(1)
    return Learner(dls, Net(), loss_func=MSELossFlat(), cbs=kw.pop('cbs', []) +
                   [ExplorerCallback(path, every=kw.pop('every', 1), valid=valid, sample=10**6, **kw)])

def union_order():
    "The single-process order whose batch `b` (of 2*BS) is the union of both ranks' batch `b`: `DistributedDL` gives rank 0 the first half of the items and rank 1 the second"
    return [i for b in range(N // 2 // BS) for half in (0, N // 2) for i in range(half + b * BS, half + (b + 1) * BS)]

def _cpu_broadcast(self, t, rank):
    "fastai's `DistributedDL._broadcast` moves the indices to CUDA (for NCCL); gloo on the CPU takes them as they are"
    t = torch.tensor(t, dtype=torch.long)
    dist.broadcast(t, rank)
    return t.tolist()

class _RaiseOnRank1:
    "Raise on rank 1 at the third training batch's `after_backward`"
    def __new__(cls):
        from fastai.callback.core import Callback
        class RaiseOnRank1(Callback):
            def after_backward(self):
                if self.training and self.iter == 2 and dist.get_rank() == 1: raise RuntimeError("boom on rank 1")
        return RaiseOnRank1()

def _drift_on_rank1():
    "Nudge a weight on rank 1 only, after the first epoch's training batches: the replicas drift apart"
    from fastai.callback.core import Callback
    class DriftOnRank1(Callback):
        def after_train(self):
            if self.epoch == 0 and dist.get_rank() == 1:
                with torch.no_grad(): self.learn.model.module.lin.weight[0, 0] += 1.
    return DriftOnRank1()

def worker(rank, world, out, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), OMP_NUM_THREADS='1')
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        from fastai.distributed import DistributedDL
        from fastai.callback.progress import ProgressCallback  # noqa: F401  (Learner.no_bar)
        DistributedDL._broadcast = _cpu_broadcast
        out = Path(out)
        # DDP: each rank writes to its own folder name, so that a non-zero rank writing anything would show
        # at `verbose=2` rank 0 tells something at every epoch's end; each rank's own output goes to OUT/told/rankN.txt
        learn = learner(range(N), BS, out/('run' if rank == 0 else f'run_rank{rank}'), custom=CUSTOM, verbose=2)
        (out/'told').mkdir(exist_ok=True)
        with open(out/'told'/f'rank{rank}.txt', 'w') as f, contextlib.redirect_stdout(f):
            with learn.distrib_ctx(sync_bn=False, cpu=True), learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
        # uneven: no DDP, each rank trains on its own data; rank 0 has 5 batches (3 sampled), rank 1 has 2 (1 sampled)
        # and never calls `side`; the epoch-end reduction must still meet, once per epoch. fastai gathers each batch's
        # loss across ranks itself when WORLD_SIZE > 1 (which needs equal batch counts), so it is told of one process
        os.environ['WORLD_SIZE'] = '1'
        learn = learner(range(5 * BS) if rank == 0 else range(2 * BS), BS, out/('uneven' if rank == 0 else f'uneven_rank{rank}'),
                        valid=False, every=2)
        learn.model.use_side = rank == 0
        with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
        # rank 0 cannot start (its run folder already holds a run): every rank stops in `before_fit`, none waits for a
        # timeout; each rank notes the error it raised in OUT/start/rankN.txt
        (out/'start').mkdir(exist_ok=True)
        try:
            learn = learner(range(N), BS, out/('run' if rank == 0 else f'exists_rank{rank}'))
            with learn.distrib_ctx(sync_bn=False, cpu=True), learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2)
        except Exception as e: (out/'start'/f'rank{rank}.txt').write_text(f"{type(e).__name__}: {e}")
        os.environ['WORLD_SIZE'] = str(world)
        # DDP, rank 1 alone edits a weight: replicas that drift apart are an alert
        learn = learner(range(N), BS, out/('drift' if rank == 0 else f'drift_rank{rank}'), cbs=[_drift_on_rank1()])
        with learn.distrib_ctx(sync_bn=False, cpu=True), learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
        # a rank that raises: it leaves `fit` at once (no collective on its way out) and the launcher ends the other
        learn = learner(range(N), BS, out/('raised' if rank == 0 else f'raised_rank{rank}'), cbs=[_RaiseOnRank1()])
        with learn.distrib_ctx(sync_bn=False, cpu=True), learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
    finally: dist.destroy_process_group()

if __name__ == '__main__':
    out,port = sys.argv[1],int(sys.argv[2])
    mp.spawn(worker, args=(2, out, port), nprocs=2, join=True)
