"A finished run on read-only storage (a read-only bind mount, or a folder this user cannot write): read back, served, drawn."
import json, os, shutil, subprocess, urllib.request
from contextlib import contextmanager
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *
from playwright.sync_api import expect
from test_browser import browser, page, serving   # noqa: F401  (the browser fixtures, and its skip without chromium)

@contextmanager
def read_only(src:Path):
    "`src` seen through a read-only bind mount (as root, where permissions do not stop writes), or made unwritable (as a user)"
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [src, *src.rglob('*')]}
        for p in modes: p.chmod(modes[p] & ~0o222)
        try: yield src
        finally:
            for p,m in modes.items(): p.chmod(m)
        return
    dst = src.parent/(src.name + '-ro')
    dst.mkdir()
    ok = subprocess.run(['mount', '--bind', str(src), str(dst)], capture_output=True).returncode == 0
    if ok and subprocess.run(['mount', '-o', 'remount,bind,ro', str(dst)], capture_output=True).returncode != 0:
        subprocess.run(['umount', str(dst)]); ok = False
    if not ok: pytest.skip('root ignores file permissions, and this machine does not allow a read-only bind mount')
    try: yield dst
    finally: subprocess.run(['umount', '-l', str(dst)], check=True)   # lazily: a failed test's traceback may hold a file open

@pytest.fixture(scope='module')
def finished(tmp_path_factory):
    "A finished digits run, with its step database and epoch history"
    root = tmp_path_factory.mktemp('ro')
    learn = digits_learner(cbs=ExplorerCallback(root/'src'/'run', every=2, valid=True))
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
    return root/'src'

def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r: return r.status, json.loads(r.read())

def test_read_only_run_is_read_served_and_drawn(finished, page):
    with read_only(finished) as ro:
        p = ro/'run'
        assert not os.access(p, os.W_OK), 'the folder should not be writable'
        with pytest.raises(OSError): (p/'probe').write_text('x')
        run = load_run(p)
        assert len(run.df) and len(run.steps) and len(run.query_steps('0.0', 'mean')) and run.hist_range('0.0')
        assert run.meta['status'] == 'finished' and len(run.epochs) == 2
        with serving(page, ro) as srv:
            assert _get(srv.url + 'api/runs/run/steps')[1]['batches'] > 0
            st,d = _get(srv.url + 'api/runs/run/steps/series?layer=0.0&stats=mean&points=7')
            assert st == 200 and d['steps'] and d['mean']['mean']
            assert _get(srv.url + 'api/runs/run/steps/hist?layer=0.0')[1]['range']
            page.goto(srv.url + '?run=run')
            expect(page.locator('#epoch-count')).to_have_text('2')
            page.locator('#tree .node[data-path="0.0"] .label').first.click()
            expect(page.locator('#panel .step-charts .chart-title').first).to_have_text('activation mean')
            expect(page.locator('#panel canvas.step-hist')).to_have_count(1)
        assert sorted(x.name for x in p.iterdir()) == sorted(x.name for x in (finished/'run').iterdir())   # nothing written
    assert page.problems == []
