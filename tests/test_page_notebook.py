"`learn.explore()` in a notebook: a real IPython kernel shows the page inline, and the page works inside a frame of a local page."
import http.server, functools, threading
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import digits_learner, ExplorerCallback, serve
from test_browser import browser, page, CHROMIUM   # noqa: F401  (fixtures)
from playwright.sync_api import expect

def _notebook(*cells):
    import nbformat
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])

def test_explore_shows_the_page_inline_in_a_kernel(tmp_path):
    "In a Jupyter kernel `learn.explore()` displays an IFrame of the page and returns its URL; in a script it only returns the URL"
    from nbclient import NotebookClient
    nb = _notebook(f"from fastai.callback.progress import *\nfrom fastexplorer.all import *\n"
                   f"learn = digits_learner(cbs=ExplorerCallback({str(tmp_path/'run')!r}, every=5))\n"
                   "with learn.no_bar(), learn.no_logging(): learn.fit(1)",
                   "url = learn.explore(port=0)\nurl",
                   "learn.explorer.server.stop()")
    NotebookClient(nb, timeout=300, kernel_name='python3', resources={'metadata': {'path': str(Path(__file__).parents[1])}}).execute()
    outs = nb.cells[1].outputs
    assert [o['output_type'] for o in outs] == ['display_data', 'execute_result'], outs
    url = outs[1]['data']['text/plain'].strip("'")
    assert url.startswith('http://127.0.0.1:') and f'src="{url}"' in outs[0]['data']['text/html'], outs
    import subprocess, sys
    script = (f"from fastai.callback.progress import *\nfrom fastexplorer.all import *\n"
              f"learn = digits_learner(cbs=ExplorerCallback({str(tmp_path/'run2')!r}, every=5))\n"
              "with learn.no_bar(), learn.no_logging(): learn.fit(1)\nprint(learn.explore(port=0))\nlearn.explorer.server.stop()")
    res = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, cwd=Path(__file__).parents[1], timeout=300)
    assert res.returncode == 0 and res.stdout.strip().startswith('http://127.0.0.1:') and len(res.stdout.splitlines()) == 1, (res.stdout, res.stderr[-2000:])

def test_page_works_in_a_frame_of_a_local_page(page, tmp_path):
    "A page of this machine (a notebook's, on another port) can show the explorer in a frame: its CSP lets loopback origins frame it"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=5))
    with learn.no_bar(), learn.no_logging(): learn.fit(2)
    with serve(tmp_path/'run', port=0) as srv:
        (tmp_path/'nb').mkdir()
        (tmp_path/'nb'/'index.html').write_text(f'<!DOCTYPE html><title>notebook</title><link rel="icon" href="data:,"><iframe src="{srv.url}" width="1200" height="800"></iframe>')
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *a): pass
        nb = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Quiet, directory=str(tmp_path/'nb')))
        threading.Thread(target=nb.serve_forever, daemon=True).start()
        try:
            page.goto(f'http://localhost:{nb.server_address[1]}/')
            frame = page.frame_locator('iframe')
            expect(frame.locator('#epoch-count')).to_have_text('2')
            expect(frame.locator('#run-id')).to_have_text('run')
        finally: nb.shutdown(); nb.server_close()
    assert page.problems == []
