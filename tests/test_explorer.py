"The explorer server: routes, the event stream, and what it must survive (RELIABILITY.md 30-34)."
import asyncio, http.client, json, os, shutil, socket, subprocess, sys, time, urllib.error, urllib.request, warnings
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *
from fastai.callback.core import Callback

@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    "A folder of two small runs"
    root = tmp_path_factory.mktemp('runs')
    for name,lr in [('good', 1e-2), ('high', 1.0)]:
        learn = digits_learner(cbs=ExplorerCallback(root/name, every=5))
        with learn.no_bar(), learn.no_logging(): learn.fit(2, lr)
    return root

@pytest.fixture
def srv(runs):
    with serve(runs, port=0) as s: yield s

def get(url, method='GET', **headers):
    req = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r: return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e: return e.code, e.read(), e.headers

def raw(port, data:bytes)->bytes:
    "Send raw bytes to the server and return what it answers"
    with socket.create_connection(('127.0.0.1', port), timeout=5) as s:
        s.sendall(data)
        try: return s.recv(4096)
        except socket.timeout: return b''

def test_routes(srv, runs):
    "The page, its assets, the run list, manifests, representations and epochs are served"
    st, body, h = get(srv.url)
    assert st == 200 and b'static/app.js' in body and h['Content-Type'].startswith('text/html')
    assert get(srv.url + 'static/app.js')[0] == 200 and get(srv.url + 'static/app.css')[0] == 200
    ids = [r['id'] for r in json.loads(get(srv.url + 'api/runs')[1])['runs']]
    assert ids == ['good', 'high']
    assert json.loads(get(srv.url + 'api/runs/good/run.json')[1])['status'] == 'finished'
    assert json.loads(get(srv.url + 'api/runs/good/representation.json')[1])['schema'] == 'fastexplorer/representation'
    assert json.loads(get(srv.url + 'api/runs/high/epochs/2')[1])['epoch'] == 2
    assert get(srv.url + 'api/runs/good/landscape.json')[0] == 404

def test_single_run_folder(runs):
    "A run folder served by itself is the run `~`"
    with serve(runs/'good', port=0) as s:
        assert [r['id'] for r in json.loads(get(s.url + 'api/runs')[1])['runs']] == ['~']
        assert get(s.url + 'api/runs/~/epochs/1')[0] == 200

def test_security_headers(srv):
    "Every response carries a content security policy allowing only the server's own scripts, and nosniff"
    for path in ('', 'api/runs', 'nope'):
        h = get(srv.url + path)[2]
        assert "script-src 'self'" in h['Content-Security-Policy'] and h['X-Content-Type-Options'] == 'nosniff', path

def test_binds_loopback_by_default(runs):
    "The default host is 127.0.0.1; any other is served only on request, with a warning"
    with serve(runs, port=0) as s: assert s.sock.getsockname()[0] == '127.0.0.1' and s.url.startswith('http://127.0.0.1:')
    with pytest.warns(UserWarning, match='anyone who can reach this machine'):
        s = serve(runs, host='0.0.0.0', port=0)
    try:
        assert s.sock.getsockname()[0] == '0.0.0.0'
        assert get(s.url + 'api/runs')[0] == 200
        assert get(s.url + 'api/runs', Host=f'rebound.example:{s.port}')[0] == 403
    finally: s.stop()

@pytest.mark.parametrize('headers', [{'Host': 'evil.example'}, {'Host': 'evil.example:8000'}, {'Origin': 'http://evil.example'},
                                     {'Origin': 'null'}, {'Origin': 'https://127.0.0.1'}])
def test_rejects_foreign_host_and_origin(srv, headers):
    "DNS rebinding (a foreign `Host`) and cross-site requests (a foreign `Origin`) are refused with 403"
    h = {k: v.replace('8000', str(srv.port)) for k,v in headers.items()}
    assert get(srv.url + 'api/runs', **h)[0] == 403

def test_accepts_own_origin(srv):
    "The served origin itself, by IP or as localhost, is accepted"
    assert get(srv.url + 'api/runs', Origin=srv.url.rstrip('/'))[0] == 200
    assert get(srv.url + 'api/runs', Host=f'localhost:{srv.port}')[0] == 200

@pytest.mark.parametrize('method', ['POST', 'PUT', 'DELETE', 'PATCH'])
def test_read_only(srv, method):
    "Only GET and HEAD are answered"
    assert get(srv.url + 'api/runs', method=method)[0] == 405

@pytest.mark.parametrize('path', ['api/nope', 'api/runs/good/epochs/99', 'api/runs/good/epochs/x', 'api/runs/good/secret.json',
                                  'static/index.html', 'static/../pyproject.toml', 'api/runs/%ff/run.json'])
def test_unknown_is_404(srv, path):
    "Anything off the allow-list is a 404"
    assert get(srv.url + path)[0] == 404

def test_hostile_bytes_and_server_keeps_running(srv):
    "Malformed requests get a 4xx (or are dropped) and the server keeps answering"
    for junk in [b'GARBAGE\r\n\r\n', b'GET /' + b'a' * 20000 + b' HTTP/1.1\r\nHost: x\r\n\r\n', b'\x00\xff\xfe\r\n\r\n',
                 f'GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Length: -1\r\n\r\n'.encode()]:
        ans = raw(srv.port, junk)
        assert ans == b'' or ans.split(b' ')[1][:1] == b'4', ans[:60]
    assert get(srv.url + 'api/runs')[0] == 200

@pytest.mark.parametrize('path', ['api/runs/../run.json', 'api/runs/..%2f..%2fetc/run.json', 'api/runs/%2e%2e/run.json',
                                  'api/runs/.%2e/representation.json', 'api/runs/good%2f..%2f..%2fx/run.json',
                                  'static/%2e%2e%2f%2e%2e%2fpyproject.toml', 'api/runs/.hidden/run.json'])
def test_traversal_is_404(srv, path):
    "Path traversal, plain or encoded, gets a 404"
    url = srv.url + path
    with socket.create_connection(('127.0.0.1', srv.port), timeout=5) as s:   # send the path verbatim
        s.sendall(f'GET /{path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nConnection: close\r\n\r\n'.encode())
        assert s.recv(64).split(b' ')[1] == b'404', url

def test_symlinks_out_of_root_are_404(tmp_path, runs):
    "A run folder or an epoch file that is a symlink pointing out of the served folder gets a 404"
    root = tmp_path/'served'; root.mkdir()
    outside = tmp_path/'outside'; shutil.copytree(runs/'good', outside)
    (root/'linked').symlink_to(outside, target_is_directory=True)
    shutil.copytree(runs/'good', root/'real')
    (root/'real'/'epoch_0002.json').unlink(); (root/'real'/'epoch_0002.json').symlink_to(outside/'epoch_0002.json')
    with serve(root, port=0) as s:
        assert [r['id'] for r in json.loads(get(s.url + 'api/runs')[1])['runs']] == ['real']
        assert get(s.url + 'api/runs/linked/run.json')[0] == 404
        assert get(s.url + 'api/runs/real/epochs/1')[0] == 200 and get(s.url + 'api/runs/real/epochs/2')[0] == 404

def test_busy_port_and_stop_frees_it(runs):
    "A busy port is an error naming it; stopping frees it for the next server"
    s = serve(runs, port=0)
    port = s.port
    with pytest.raises(OSError, match=f'port {port} on 127.0.0.1 is already in use'): serve(runs, port=port)
    get(s.url + 'api/runs')
    s.stop()
    assert not s.thread.is_alive()
    s2 = serve(runs, port=port)
    assert get(s2.url + 'api/runs')[0] == 200
    s2.stop()

def test_starts_inside_a_running_event_loop(runs):
    "It serves from a thread, so it starts where an event loop already runs (as in Jupyter)"
    async def main():
        with serve(runs, port=0) as s: return await asyncio.to_thread(get, s.url + 'api/runs')
    assert asyncio.run(main())[0] == 200

def _event(r, name:str)->dict:
    "The data of the next event called `name` on event stream `r` (others are skipped)"
    while True:
        lines = []
        while (l := r.fp.readline().decode().strip()) or not lines:
            if l: lines.append(l)
        if f'event: {name}' in lines: return json.loads(lines[-1].removeprefix('data: '))

def _events(s, run:str):
    "An open response of `run`'s event stream on server `s`"
    c = http.client.HTTPConnection('127.0.0.1', s.port, timeout=5)
    c.request('GET', f'/api/runs/{run}/events', headers={'Host': f'127.0.0.1:{s.port}'})
    return c.getresponse()

def test_new_epoch_reaches_event_stream_within_2s(tmp_path, runs):
    "An epoch written while a client listens arrives as an `update` event within 2 seconds"
    shutil.copytree(runs/'good', tmp_path/'live')
    with serve(tmp_path, port=0) as s:
        r = _events(s, 'live')
        assert r.status == 200 and r.headers['Content-Type'].startswith('text/event-stream')
        event = lambda: _event(r, 'update')
        assert event()['epochs'] == [1, 2]
        m = json.loads((tmp_path/'live'/'run.json').read_text())
        shutil.copy(tmp_path/'live'/'epoch_0002.json', tmp_path/'live'/'epoch_0003.json')
        t = time.monotonic()
        append_line(tmp_path/'live'/'epochs.jsonl', {'epoch': 3, 'file': 'epoch_0003.json', 'partial': False})   # as RunWriter.write_epoch
        save_json(m, tmp_path/'live'/'run.json')
        assert event()['epochs'] == [1, 2, 3] and time.monotonic() - t < 2
        r.close()

def test_report_is_self_contained(runs, tmp_path):
    "The report inlines the page, its assets and every run's data, and escapes `<` in the data"
    out = report(runs, tmp_path/'r.html')
    html = out.read_text()
    assert 'static/app.js' not in html and 'static/app.css' not in html and 'window.FASTEXPLORER_DATA' in html
    data = html.split('window.FASTEXPLORER_DATA = ', 1)[1].split(';</script>', 1)[0]
    d = json.loads(data)
    assert [r['id'] for r in d['runs']] == ['good', 'high'] and len(d['runs'][0]['epochs']) == 2
    with pytest.raises(FileNotFoundError, match='no run'): report(tmp_path, tmp_path/'x.html')

def test_explore_needs_a_callback():
    "`learn.explore()` without an `ExplorerCallback` says what to do"
    with pytest.raises(ValueError, match='no ExplorerCallback'): digits_learner().explore()

def test_learn_explore_serves_the_run(tmp_path):
    "`learn.explore()` serves the callback's run folder and returns its URL"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=5))
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    url = learn.explore(port=0)
    try: assert [r['id'] for r in json.loads(get(url + 'api/runs')[1])['runs']] == ['~']
    finally: learn.explorer.server.stop()

def test_cli_report_and_errors(runs, tmp_path):
    "`fastexplorer report RUN -o FILE` writes the report; a missing folder is a clear error"
    from fastexplorer.cli import main
    assert main(['report', str(runs/'good'), '-o', str(tmp_path/'rep.html')]) == 0 and (tmp_path/'rep.html').exists()
    with pytest.raises(SystemExit, match='no such folder'): main(['serve', str(tmp_path/'nope')])

def test_serve_warns_about_a_folder_with_no_run(tmp_path, monkeypatch, capsys):
    "`fastexplorer serve FOLDER` on a folder holding no run (issue 46): a warning at start naming it and what a run folder holds; none for a run"
    import fastexplorer.cli as cli
    served = []
    monkeypatch.setattr(cli, '_serve_until_interrupted', lambda path, *a: served.append(path))
    assert cli.main(['serve', str(tmp_path)]) == 0 and served == [str(tmp_path)]
    err = capsys.readouterr().err
    assert f"no run in {str(tmp_path)!r}" in err and 'run.json' in err and 'ExplorerCallback' in err, err
    w = RunWriter(tmp_path/'r').open('M'); w.write_manifest(status='finished'); w.close()   # one run: nothing to say
    assert cli.main(['serve', str(tmp_path)]) == 0 and capsys.readouterr().err == ''

def test_callback_serves_while_training(tmp_path):
    "`ExplorerCallback(serve=True)` serves the run from the first fit on, while it trains"
    seen = []
    class Peek(Callback):
        order = ExplorerCallback.order + 1
        def after_epoch(self): seen.append(json.loads(get(self.learn.explorer.server.url + 'api/runs')[1])['runs'][0]['epochs'])
    learn = digits_learner(cbs=[ExplorerCallback(tmp_path/'run', every=5, serve=True, port=0), Peek()])
    try:
        with learn.no_bar(), learn.no_logging(): learn.fit(2)
        assert seen == [1, 2]
    finally: learn.explorer.server.stop()

def test_step_api(srv, runs):
    "The step series: the summary, a layer's and a parameter's series, the loss, a hyper-parameter and a histogram"
    info = json.loads(get(srv.url + 'api/runs/good/steps')[1])
    assert info['batches'] > 0 and [e['epoch'] for e in info['epochs']] == [1, 2] and info['layers'] and info['params']
    lay,par = info['layers'][1],info['params'][0]
    st,body,h = get(srv.url + f'api/runs/good/steps/series?layer={lay}&stats=mean,std&points=7')
    d = json.loads(body)
    assert st == 200 and "script-src 'self'" in h['Content-Security-Policy'], 'the same security headers'
    assert 0 < len(d['steps']) <= 7 and set(d) >= {'mean', 'std'} and len(d['mean']['min']) == len(d['steps'])
    d = json.loads(get(srv.url + f'api/runs/good/steps/series?layer={lay}&stats=mean&start=10&stop=20')[1])
    assert d['steps'] and 10 <= min(d['steps']) and max(d['steps']) <= 20, 'start and stop narrow the range'
    assert json.loads(get(srv.url + f'api/runs/good/steps/series?layer={par}&kind=grad&stats=norm')[1])['norm']['mean']
    assert json.loads(get(srv.url + 'api/runs/good/steps/series?kind=loss')[1])['smooth_loss']['mean']
    assert json.loads(get(srv.url + 'api/runs/good/steps/series?kind=hyper&layer=group%200&stats=lr')[1])['lr']['mean']
    hs = json.loads(get(srv.url + f'api/runs/good/steps/hist?layer={lay}&points=5')[1])
    assert 0 < len(hs['counts']) <= 5 and len(hs['counts'][0]) == json.loads((runs/'good'/'run.json').read_text())['hist']['bins'] + 2

@pytest.mark.parametrize('query,name', [('layer=0&points=x', 'points'), ('layer=0&points=100000', 'points'), ('layer=0&start=-1', 'start'),
    ('layer=0&start=9&stop=2', 'stop'), ('layer=0&kind=drop', 'kind'), ('kind=act', 'layer'), ('layer=0&stats=bogus', 'bogus'),
    ('layer=0&where=1', 'where'), ('layer=0&stop=1.5', 'stop')])
def test_step_api_rejects_bad_parameters(srv, query, name):
    "A bad query parameter is a 400 that names it"
    st,body,_ = get(srv.url + 'api/runs/good/steps/series?' + query)
    assert st == 400 and name in json.loads(body)['error'], (st, body)

def test_step_api_404(srv, runs, tmp_path):
    "An unknown layer, an unknown run and a run without steps.sqlite are 404s, the last one saying why"
    assert get(srv.url + 'api/runs/good/steps/series?layer=no.such')[0] == 404
    assert get(srv.url + 'api/runs/good/steps/hist?layer=no.such')[0] == 404
    assert get(srv.url + 'api/runs/good/steps/other')[0] == 404
    assert get(srv.url + 'api/runs/nope/steps')[0] == 404
    assert get(srv.url + 'api/runs/good/steps/hist?split=test&layer=0')[0] == 400
    shutil.copytree(runs/'good', tmp_path/'old', ignore=shutil.ignore_patterns('steps.sqlite*'))
    with serve(tmp_path, port=0) as s:
        st,body,_ = get(s.url + 'api/runs/old/steps')
        assert st == 404 and 'steps.sqlite' in json.loads(body)['error']

def test_new_steps_reach_event_stream(tmp_path, runs):
    "Batches appended to steps.sqlite while a client listens arrive as a `steps` event; a live alert changes `update`"
    shutil.copytree(runs/'good', tmp_path/'live')
    with serve(tmp_path, port=0) as s:
        r = _events(s, 'live')
        assert _event(r, 'update')['live_alerts'] == 0
        first = _event(r, 'steps')
        from fastexplorer.stepdb import StepWriter
        w = StepWriter(tmp_path/'live', **{k: v for k,v in zip(('hist_bins', 'hist_range'), _hist(tmp_path/'live'))})
        w.append([{'step': first['last_step'] + 1, 'fit': 0, 'epoch': 3, 'split': 'train', 'iter': 0, 'loss': 1., 'smooth_loss': 1.}])
        w.close()
        nxt = _event(r, 'steps')
        assert nxt['batches'] == first['batches'] + 1 and nxt['last_step'] == first['last_step'] + 1 and nxt['epochs'][-1]['epoch'] == 3
        m = json.loads((tmp_path/'live'/'run.json').read_text())
        m['live_alerts'] = [{'kind': 'nonfinite', 'layer': '0', 'stat': 'nan', 'value': 3, 'message': 'NaN', 'epoch': 3, 'step': 99}]
        save_json(m, tmp_path/'live'/'run.json')
        assert _event(r, 'update')['live_alerts'] == 1
        r.close()

def _hist(p:Path)->tuple:
    h = json.loads((p/'run.json').read_text())['hist']
    return h['bins'],(None if h['range'] is None else tuple(h['range']))   # `None`: bins fitted to each layer

def test_accepted_sockets_have_tcp_nodelay(srv):
    "The listening socket says TCP, so asyncio sets TCP_NODELAY on every accepted connection (no delayed-ACK wait on small responses)"
    assert srv.sock.proto == socket.IPPROTO_TCP
    a = socket.socket(srv.sock.family, socket.SOCK_STREAM, socket.IPPROTO_TCP); a.bind(('127.0.0.1', 0)); a.listen(1)
    with a, socket.create_connection(a.getsockname()) as c:
        conn,_ = a.accept()
        with conn:
            from asyncio.base_events import _set_nodelay
            _set_nodelay(conn)
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), 'a socket accepted like the server\'s gets TCP_NODELAY from asyncio'


def test_server_imports_no_training_code():
    "The server reads run folders only: importing it loads neither the callback, the statistics, the probe nor fastai's Learner"
    code = ("import sys, fastexplorer.explorer\n"
            "print(sorted(m for m in ('fastexplorer.callback', 'fastexplorer.stats', 'fastexplorer.steps', 'fastexplorer.probe', "
            "'fastexplorer.state', 'fastexplorer.hooks', 'fastexplorer.params', 'fastexplorer.alerts', 'fastexplorer.training', "
            "'fastexplorer.export', 'fastexplorer.landscape', 'fastai.learner') if m in sys.modules))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == '[]', out
