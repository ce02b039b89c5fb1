"""Two processes, one per GPU, training under DDP with NCCL and `ExplorerCallback`: `python tests/nccl_worker.py OUT PORT`,
launched by `tests/test_cuda.py::test_ddp_nccl` where two CUDA devices exist. Rank 0 writes `OUT/run`; rank 1 is given
`OUT/run_rank1`, which must stay unwritten. With a third argument `cpu`, the same on two CPU processes with gloo: the
worker's own check, on any machine."""
import datetime, os, sys
from pathlib import Path
import torch, torch.distributed as dist, torch.multiprocessing as mp

def work(rank:int, out:str, port:str, cpu:bool):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=port, RANK=str(rank), WORLD_SIZE='2', LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE='2', OMP_NUM_THREADS='1')
    if not cpu: torch.cuda.set_device(rank)
    dist.init_process_group('gloo' if cpu else 'nccl', rank=rank, world_size=2, timeout=datetime.timedelta(seconds=120))
    try:
        from torch import nn
        from fastai.basics import Learner, DataLoaders, DataLoader, MSELossFlat
        from fastai.distributed import DistributedDL   # noqa: F401  (Learner.distrib_ctx)
        from fastai.callback.progress import ProgressCallback   # noqa: F401  (Learner.no_bar)
        from fastexplorer.all import ExplorerCallback
        if cpu:
            sys.path.insert(0, str(Path(__file__).parent))
            from ddp_worker import _cpu_broadcast
            DistributedDL._broadcast = _cpu_broadcast
        g = torch.Generator().manual_seed(0)
        x = torch.randn(64, 8, generator=g); y = x.sum(1, keepdim=True)
        items = [(x[i], y[i]) for i in range(64)]
        dev = 'cpu' if cpu else f'cuda:{rank}'
        dls = DataLoaders(DataLoader(items, bs=8), DataLoader(items[:16], bs=8), device=dev)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        path = Path(out)/('run' if rank == 0 else f'run_rank{rank}')
        learn = Learner(dls, model, loss_func=MSELossFlat(), cbs=ExplorerCallback(path, every=1))
        ctx = learn.distrib_ctx(sync_bn=False, cpu=True) if cpu else learn.distrib_ctx(sync_bn=False, cuda_id=rank)
        with ctx, learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2)
    finally: dist.destroy_process_group()

if __name__ == '__main__': mp.spawn(work, args=(sys.argv[1], sys.argv[2], sys.argv[3:] == ['cpu']), nprocs=2)
