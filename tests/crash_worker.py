"A zygote for tests/test_crash.py: imports fastexplorer once, then forks a fit for each run folder read on stdin (its pid, then its exit status, on stdout), so that twenty fits killed with SIGKILL cost no twenty imports"
import os, signal, sys
from pathlib import Path
from fastai.callback.core import Callback
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *

class Killer(Callback):
    "SIGKILL this process at the `n`-th batch or epoch end of the fit: a moment counted in events, not seconds"
    order = 100   # after `ExplorerCallback`: its writes of that event are done, or under way in its writer thread
    def __init__(self, n:int): self.n = n
    def __call__(self, event_name):
        super().__call__(event_name)
        if event_name in ('after_batch', 'after_epoch'):
            self.n -= 1
            if self.n < 0: os.kill(os.getpid(), signal.SIGKILL)

def fit(path:str, epochs:int, kill:int|None=None):
    "A fit with step statistics and snapshots, going on with the run in `path` if there is one; killed at event `kill`"
    import torch
    torch.set_num_threads(1)
    cbs = [ExplorerCallback(path, every=1, snapshots=True, resume=(Path(path)/'run.json').exists())]
    learn = digits_learner(cbs=cbs + ([Killer(kill)] if kill is not None else []))
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs, 1e-2)

if __name__ == '__main__':
    for line in sys.stdin:
        path,epochs,*kill = line.split()
        pid = os.fork()
        if pid == 0:                      # the child: the fit, and nothing else of this loop
            code = 0
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                fit(path, int(epochs), int(kill[0]) if kill else None)
            except BaseException as e: print(f"{type(e).__name__}: {e}", file=sys.stderr); code = 1
            finally: os._exit(code)
        print(pid, flush=True)
        _,status = os.waitpid(pid, 0)
        print(f"exit {status}", flush=True)
