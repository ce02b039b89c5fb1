"A disk that fills up before or during a fit: the error names the file, and `run.json` says the run failed, never `running`."
import json, os, subprocess
from contextlib import contextmanager
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *

@contextmanager
def small_disk(p:Path, size:str):
    "A tmpfs of `size` mounted at `p` (root only, where mounting is allowed)"
    p.mkdir()
    if os.geteuid() != 0 or subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size}', 'tmpfs', str(p)], capture_output=True).returncode:
        pytest.skip('a small file system needs root and a machine that allows mounting one')
    try: yield p
    finally: subprocess.run(['umount', '-l', str(p)], check=True)   # lazily: a failed test's traceback may hold a file open

@pytest.mark.parametrize('size', ['200k', '300k', '400k', '500k'])
def test_full_disk_fails_the_run_and_says_where(tmp_path, size):
    with small_disk(tmp_path/'disk', size) as d:
        learn = digits_learner(cbs=ExplorerCallback(d/'run', every=2))
        with pytest.raises(Exception) as e:
            with learn.no_bar(), learn.no_logging(): learn.fit(3)
        msg = str(e.value)
        assert str(d/'run') in msg and ('No space left' in msg or 'disk is full' in msg), msg   # names the file it could not write
        if (d/'run'/'run.json').exists():   # a folder made by the failed start is removed; else the run says it failed
            m = json.loads((d/'run'/'run.json').read_text())
            assert m['status'] == 'failed' and str(d/'run') in m['error'], m
        assert not any(f.name.endswith('.tmp') for f in d.rglob('*')), 'no temporary left behind'
