"A zygote for tests/test_crash.py: imports fastexplorer once, then forks a fit for each run folder read on stdin (its pid, then its exit status, on stdout), so that twenty fits killed with SIGKILL cost no twenty imports"
import os, sys
from pathlib import Path
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *

def fit(path:str, epochs:int):
    "A fit with step statistics and weight snapshots, going on with the run in `path` if there is one"
    import torch
    torch.set_num_threads(1)
    learn = digits_learner(cbs=ExplorerCallback(path, every=1, snapshots=True, resume=(Path(path)/'run.json').exists()))
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs, 1e-2)

if __name__ == '__main__':
    for line in sys.stdin:
        path,epochs = line.split()
        pid = os.fork()
        if pid == 0:                      # the child: the fit, and nothing else of this loop
            code = 0
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                fit(path, int(epochs))
            except BaseException as e: print(f"{type(e).__name__}: {e}", file=sys.stderr); code = 1
            finally: os._exit(code)
        print(pid, flush=True)
        _,status = os.waitpid(pid, 0)
        print(f"exit {status}", flush=True)
