"The server, the run list and the readers facing damaged run folders, odd names and odd requests (issue 17): a clear 4xx or an error naming the file, never a 5xx."
import json, shutil, socket, urllib.parse
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *
from fastexplorer.run import run_dir
from test_explorer import get, raw

@pytest.fixture(scope='module')
def good(tmp_path_factory):
    "One small real run (one epoch: manifest, epoch index, representation, step series and history)"
    p = tmp_path_factory.mktemp('robust')/'good'
    learn = digits_learner(cbs=ExplorerCallback(p, every=5))
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    return p

def _copy(good:Path, dest:Path)->Path:
    shutil.copytree(good, dest)
    return dest

def _truncate(f:Path, keep:float=0.5):
    b = f.read_bytes(); f.write_bytes(b[:int(len(b) * keep)])

def _get(s, path:str):
    "Status and parsed JSON body of `path` (already URL-quoted) on server `s`"
    st,body,_ = get(s.url + path)
    return st,json.loads(body)

@pytest.mark.parametrize('manifest,why', [('[]', 'array'), ('"x"', 'string'), ('{"model": "M"}', 'status'),
    ('{"status": "finished", "epochs": [1]}', 'epochs'), ('{"schema": "other/thing", "status": "x"}', 'schema'), (None, 'JSON')])
def test_unreadable_manifest_is_listed_with_its_reason(good, tmp_path, manifest, why):
    "A run whose run.json is not a manifest (JSON but no object, keys missing, or cut short) is listed as unreadable, naming the file; the others are served"
    _copy(good, tmp_path/'good'); bad = _copy(good, tmp_path/'bad')
    if manifest is None: _truncate(bad/'run.json')
    else: (bad/'run.json').write_text(manifest)
    runs = {r['id']: r for r in list_runs(tmp_path)}
    assert runs['good']['status'] == 'finished' and 'error' not in runs['good']
    assert runs['bad']['status'] == 'unreadable' and 'bad/run.json' in runs['bad']['error'] and why in runs['bad']['error'], runs['bad']
    assert set(runs['bad']) >= set(runs['good']), 'the keys the page reads are all there'
    with serve(tmp_path, port=0) as s:
        st,d = _get(s, 'api/runs')
        assert st == 200 and [(r['id'], r['status']) for r in d['runs']] == [('bad', 'unreadable'), ('good', 'finished')]
        for path in ('run.json', 'epochs/1', 'epochs'):
            st,d = _get(s, f'api/runs/bad/{path}')
            assert st == 422 and 'run.json' in d['error'] and str(tmp_path) not in d['error'], (path, st, d)
        assert _get(s, 'api/runs/good/epochs/1')[0] == 200

def test_truncated_manifest_epoch_route(good, tmp_path):
    "A run.json cut short while a reader asks for an epoch: a 422 naming run.json, not a 500"
    _truncate(_copy(good, tmp_path/'r')/'run.json', 0.3)
    with serve(tmp_path, port=0) as s:
        st,d = _get(s, 'api/runs/r/epochs/1')
        assert st == 422 and 'r/run.json' in d['error'], (st, d)

@pytest.mark.parametrize('order', ['evil first', 'evil last'])
def test_duplicate_host_is_refused(good, tmp_path, order):
    "Two Host headers (the guard and Starlette could read different ones) are refused with a 400, never redirected to either"
    _copy(good, tmp_path/'good')
    with serve(tmp_path, port=0) as s:
        own = f'127.0.0.1:{s.port}'
        hosts = ['evil.example', own] if order == 'evil first' else [own, 'evil.example']
        ans = raw(s.port, (f'GET /api/runs/ HTTP/1.1\r\nHost: {hosts[0]}\r\nHost: {hosts[1]}\r\nConnection: close\r\n\r\n').encode())
        assert ans.split(b' ')[1] == b'400' and b'evil' not in ans.lower(), ans[:300]
        ans = raw(s.port, (f'GET /api/runs HTTP/1.1\r\nHost: {own}\r\nOrigin: http://{own}\r\nOrigin: http://evil.example\r\n'
                           'Connection: close\r\n\r\n').encode())
        assert ans.split(b' ')[1] == b'400', ans[:300]
        assert get(s.url + 'api/runs')[0] == 200

@pytest.mark.parametrize('name', ['a' * 300, 'é' * 200, '%E2%82%AC' * 90], ids=['ascii', 'accents', 'encoded'])
@pytest.mark.parametrize('rest', ['run.json', 'epochs/1', 'epochs', 'steps', 'history', 'events', 'representation.json'])
def test_long_run_name_is_404(good, tmp_path, name, rest):
    "A run name longer than a folder name can be (ENAMETOOLONG) is a 404, on every route"
    _copy(good, tmp_path/'good')
    with serve(tmp_path, port=0) as s:
        assert get(s.url + f'api/runs/{urllib.parse.quote(name, safe="%")}/{rest}')[0] == 404

def test_huge_epoch_number_is_404(good, tmp_path):
    "An epoch number of thousands of digits (past Python's int-parsing limit) is a 404"
    _copy(good, tmp_path/'good')
    with serve(tmp_path, port=0) as s:
        assert get(s.url + 'api/runs/good/epochs/' + '9' * 5000)[0] == 404
        assert get(s.url + 'api/runs/good/epochs/1')[0] == 200

def test_truncated_epoch_file_names_it(good, tmp_path):
    "`load_run` and `report` on a truncated epoch file raise a ValueError naming that file"
    p = _copy(good, tmp_path/'r')
    _truncate(p/'epoch_0001.json')
    with pytest.raises(ValueError, match=str(p/'epoch_0001.json')): load_run(p).epochs
    with pytest.raises(ValueError, match='epoch_0001.json'): report(tmp_path, tmp_path/'rep.html')
    assert not (tmp_path/'rep.html').exists()
    (p/'epoch_0001.json').write_text('[1, 2]')
    with pytest.raises(ValueError, match=str(p/'epoch_0001.json')): load_run(p).epochs

def test_truncated_manifest_load_run_names_it(good, tmp_path):
    "`load_run` on a truncated or non-object run.json raises a ValueError naming it"
    p = _copy(good, tmp_path/'r')
    _truncate(p/'run.json')
    with pytest.raises(ValueError, match=str(p/'run.json')): load_run(p)
    (p/'run.json').write_text('"x"')
    with pytest.raises(ValueError, match=str(p/'run.json')): load_run(p)

def test_report_refuses_an_unreadable_run(good, tmp_path):
    "`report` of a folder holding an unreadable run says which file, and writes nothing"
    _copy(good, tmp_path/'good'); (_copy(good, tmp_path/'bad')/'run.json').write_text('[]')
    with pytest.raises(ValueError, match='bad/run.json'): report(tmp_path, tmp_path/'rep.html')
    assert not (tmp_path/'rep.html').exists()

NAMES = ['my run', 'résumé', '数据 run', 'a+b=c&d?', "it's #1 (100%)", 'x' * 80 + 'é' * 80]

def test_unicode_run_names(good, tmp_path):
    "Run folders with spaces, accents, other scripts and URL characters are listed, served and reported"
    for n in NAMES: _copy(good, tmp_path/n)
    assert sorted(r['id'] for r in list_runs(tmp_path)) == sorted(NAMES)
    with serve(tmp_path, port=0) as s:
        for n in NAMES:
            q = urllib.parse.quote(n, safe='')
            st,d = _get(s, f'api/runs/{q}/run.json')
            assert st == 200 and d['status'] == 'finished', (n, st)
            assert _get(s, f'api/runs/{q}/epochs/1')[0] == 200 and _get(s, f'api/runs/{q}/steps')[0] == 200, n
    html = report(tmp_path, tmp_path/'rep.html').read_text()
    d = json.loads(html.split('window.FASTEXPLORER_DATA = ', 1)[1].split(';</script>', 1)[0])
    assert sorted(r['id'] for r in d['runs']) == sorted(NAMES)

@pytest.mark.parametrize('name', ['..', '.', '', '.hidden', 'a/b', 'a\\b', 'a\x00b', 'new\nline', 'tab\t', 'del\x7f', 'c1\x85',
                                  '\udcff', 'x' * 256, 'é' * 128], ids=lambda n: repr(n)[:16])
def test_unsafe_run_names_are_refused(good, tmp_path, name):
    "Names that are not one safe path component (separators, dots, control characters, undecodable bytes, too long) name no run"
    _copy(good, tmp_path/'good'); _copy(good, tmp_path/'sub'/'good')
    assert run_dir(tmp_path/'sub', name) is None
    assert run_dir(tmp_path/'sub', 'good') == tmp_path/'sub'/'good'

def test_odd_folder_names_on_disk(good, tmp_path):
    "Folders whose names are not safe (a newline, undecodable bytes) are not listed, and do not stop the others being listed"
    _copy(good, tmp_path/'good'); _copy(good, tmp_path/'new\nline')
    try: _copy(good, Path(str(tmp_path) + '/bad\udcff'))    # the bytes b'bad\xff', as Python reads a name that is not UTF-8
    except (OSError, UnicodeEncodeError): pass                  # a file system that only takes UTF-8 names
    assert [r['id'] for r in list_runs(tmp_path)] == ['good']
    with serve(tmp_path, port=0) as s:
        assert [r['id'] for r in _get(s, 'api/runs')[1]['runs']] == ['good']
        assert get(s.url + 'api/runs/bad%FF/run.json')[0] == 404 and get(s.url + 'api/runs/new%0Aline/run.json')[0] == 404

@pytest.mark.parametrize('f,content', [('steps.sqlite', b'not a database' * 100), ('history.sqlite', b'\x00' * 4096),
                                       ('epochs.jsonl', b'{"epoch": 1, "file": 7}\n[]\n\xff\xfe\n'), ('representation.json', None)],
                         ids=['steps', 'history', 'index', 'representation'])
def test_garbage_files_are_4xx(good, tmp_path, f, content):
    "A run file that holds garbage gets a 4xx from every route, never a 500"
    p = _copy(good, tmp_path/'r')
    if content is None: _truncate(p/f)
    else: (p/f).write_bytes(content)
    with serve(tmp_path, port=0) as s:
        for path in ('api/runs', 'api/runs/r/run.json', 'api/runs/r/representation.json', 'api/runs/r/epochs/1', 'api/runs/r/epochs',
                     'api/runs/r/steps', 'api/runs/r/steps/series?kind=loss', 'api/runs/r/steps/hist?layer=0',
                     'api/runs/r/steps/series?layer=0&kind=act', 'api/runs/r/history?path=0'):
            assert get(s.url + path)[0] < 500, path

def test_page_shows_an_unreadable_run(good, tmp_path):
    "The page opens the first readable run, shows an unreadable one greyed with its reason, and says why when asked for it; Unicode names work"
    import os
    if not os.path.exists('/usr/bin/chromium'):
        if os.environ.get('CI'): raise RuntimeError('/usr/bin/chromium is missing: scripts/test.sh installs it')
        pytest.skip('/usr/bin/chromium is not installed')
    from playwright.sync_api import sync_playwright, expect
    (_copy(good, tmp_path/'a-bad')/'run.json').write_text('[]')       # sorts first
    _copy(good, tmp_path/'good'); _copy(good, tmp_path/'my run')
    with sync_playwright() as pw, serve(tmp_path, port=0) as s:
        b = pw.chromium.launch(executable_path='/usr/bin/chromium', args=['--headless', '--no-sandbox', '--disable-gpu'])
        try:
            page = b.new_page(); problems = []
            page.on('console', lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ('error', 'warning') else None)
            page.on('pageerror', lambda e: problems.append(f"pageerror: {e}"))
            page.goto(s.url)
            expect(page.locator('#run-id')).to_have_text('good')
            bad = page.locator('#runs .unreadable')
            expect(bad).to_have_text('a-bad'); expect(bad).to_have_attribute('title', 'cannot be read: a-bad/run.json: holds an array, not a run manifest (an object)')
            expect(page.locator('#compare option[disabled]')).to_have_text('a-bad (cannot be read)')
            page.goto(s.url + '?run=a-bad')
            expect(page.locator('#message')).to_contain_text('Run "a-bad" cannot be read: a-bad/run.json: holds an array')
            expect(page.locator('#message a')).to_have_text(['good', 'my run'])
            page.goto(s.url + '?run=my%20run')
            expect(page.locator('#run-id')).to_have_text('my run')
            expect(page.locator('#epoch-count')).to_have_text('1')
            page.goto('about:blank')
            assert problems == [], problems
        finally: b.close()

def test_report_cli_names_an_unreadable_run(good, tmp_path):
    "`fastexplorer report` on a folder holding an unreadable run: a one-line error naming the file, not a traceback"
    from fastexplorer.cli import main
    _copy(good, tmp_path/'good'); (_copy(good, tmp_path/'bad')/'run.json').write_text('"x"')
    with pytest.raises(SystemExit, match=r'fastexplorer report: .*bad/run\.json'): main(['report', str(tmp_path), '-o', str(tmp_path/'rep.html')])
    assert not (tmp_path/'rep.html').exists()
