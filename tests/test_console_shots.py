"Findings told in a real Jupyter kernel (HTML under fastai's table) and in a real terminal (a pty), with screenshots of both in `tests/output/` (issue 46)"
import html, os, re, subprocess, sys
from pathlib import Path
from test_browser import browser, page, SHOTS   # noqa: F401  (fixtures; skips where there is no Chromium)
from test_console import SCRIPT, blocks, rows

ROOT = Path(__file__).resolve().parent.parent
CSS = ('body{font-family:sans-serif;margin:16px;font-size:13px} pre{margin:4px 0} .in{background:#f5f5f5;padding:6px;'
       'border:1px solid #ddd} table.dataframe{border-collapse:collapse;margin:4px 0} table.dataframe td,'
       'table.dataframe th{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}'
       '.term{background:#1e1e1e;color:#ddd;padding:10px;font-size:12px;width:max-content}')

def _notebook(*cells):
    import nbformat
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])

def _html(o)->str:
    "One cell output as a notebook shows it"
    if o['output_type'] == 'stream': return f"<pre>{html.escape(o['text'])}</pre>"
    d = o.get('data', {})
    return d['text/html'] if 'text/html' in d else f"<pre>{html.escape(d.get('text/plain', ''))}</pre>"

def _kinds(o)->str:
    "What made output `o`: ours (`fastexplorer`), fastprogress's table (`table`), or something else"
    h = o.get('data', {}).get('text/html', '')
    return 'fastexplorer' if '<b>fastexplorer</b>' in h else 'table' if 'train_loss' in h else o['output_type']

def test_findings_show_as_html_tables_in_a_notebook(page, tmp_path):
    "In a kernel the preflight's error is an HTML table before fastai's, lr 10's finding one after it, and `learn.preflight()` a table"
    from nbclient import NotebookClient
    run = lambda name: repr(str(tmp_path/name))
    nb = _notebook("from fastexplorer.all import *\nfrom torch import nn\nfrom fastai.callback.progress import *",
                   f"learn = digits_learner(cbs=ExplorerCallback({run('softmax')}))\n"
                   "learn.model = nn.Sequential(*learn.model, nn.Softmax(-1))\nlearn.fit(1, 1e-3)",
                   f"learn = digits_learner(cbs=ExplorerCallback({run('lr10')}))\nlearn.fit(2, 10)",
                   "learn.preflight()")
    NotebookClient(nb, timeout=600, kernel_name='python3', resources={'metadata': {'path': str(tmp_path)}}).execute()
    soft,lr,pre = [[_kinds(o) for o in c.outputs] for c in nb.cells[1:]]
    assert soft.index('fastexplorer') < soft.index('table') and soft.count('fastexplorer') == 1, soft
    ours = next(o['data']['text/html'] for o in nb.cells[1].outputs if _kinds(o) == 'fastexplorer')
    assert 'output_activation' in ours and 'class="dataframe fastprogress"' in ours and 'Softmax' in ours, ours
    assert lr.index('table') < lr.index('fastexplorer'), lr
    told = ' '.join(o['data']['text/html'] for o in nb.cells[2].outputs if _kinds(o) == 'fastexplorer')
    assert re.search(r'lr_too_high|loss_diverging', told), told
    res = nb.cells[3].outputs[-1]
    assert res['output_type'] == 'execute_result' and '<table' in res['data']['text/html'], res
    assert res['data']['text/plain'].startswith('preflight on one batch: '), res['data']['text/plain']
    cells = ''.join(f"<pre class='in'>{html.escape(c.source)}</pre>" + ''.join(_html(o) for o in c.outputs) for c in nb.cells)
    (tmp_path/'nb.html').write_text(f"<html><head><style>{CSS}</style></head><body>{cells}</body></html>")
    page.goto((tmp_path/'nb.html').as_uri())
    page.screenshot(path=str(SHOTS/'console_notebook.png'), full_page=True)

def screen(raw:str)->list:
    "What a terminal shows of `raw` at its end: each line's last carriage-return segment, escape sequences dropped"
    raw = re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', raw.replace('\r\n', '\n'))
    return [l.split('\r')[-1].rstrip() for l in raw.split('\n')]

def test_findings_print_as_plain_lines_in_a_terminal(page, tmp_path):
    "In a terminal (a pty, 100 columns) the preflight's error comes before fastai's table and lr 10's finding after its epoch's row"
    (tmp_path/'s.py').write_text(SCRIPT)
    cmd = f"{sys.executable} s.py runs softmax:1 lr10:1"
    env = {**os.environ, 'COLUMNS': '100', 'LINES': '50', 'TERM': 'xterm', 'PYTHONWARNINGS': ''}
    r = subprocess.run(['script', '-qfec', cmd, '/dev/null'], cwd=tmp_path, env=env, capture_output=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:]
    ls = screen(r.stdout.decode())
    soft,lr = ls[:ls.index('=== lr10:1')],ls[ls.index('=== lr10:1'):]
    assert blocks(soft)[0][2] == [('error', 'output_activation')] and blocks(soft)[0][0] < rows(soft)[0], soft
    assert all(len(l) <= 100 for b in blocks(lr) for l in lr[b[0] + 1:b[0] + 6] if l.startswith('  ')), lr
    assert any(k in ('lr_too_high', 'loss_diverging') for b in blocks(lr) for _,k in b[2]), lr
    shown = html.escape('\n'.join(l for l in ls if l.strip()).replace(str(tmp_path) + '/', ''))
    (tmp_path/'term.html').write_text(f"<html><head><style>{CSS}</style></head><body><pre class='term'>$ python "
                                      f"train.py\n{shown}</pre></body></html>")
    page.goto((tmp_path/'term.html').as_uri())
    page.screenshot(path=str(SHOTS/'console_terminal.png'), full_page=True)
