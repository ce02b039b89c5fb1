"""A bounded, seeded fuzz of the explorer server (issue 17): a few thousand random requests (methods, paths with `..` and
encoded forms, query strings, duplicate or foreign `Host` and `Origin` headers) to a folder of runs with odd names,
truncated and garbage files and symlinks out of it. No request gets a 5xx, none gets anything from outside the folder."""
import http.client, json, random, shutil, string, time, urllib.parse, urllib.request
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *

SECRET = 'FX-FUZZ-SECRET-7d41c0'   # in every file outside the served folder; no answer may hold it
N,NBAD = 5000,14                   # requests, damaged runs
FILES = ['run.json', 'epochs.jsonl', 'epoch_0001.json', 'representation.json', 'steps.sqlite', 'history.sqlite', 'landscape.json']
NAMES = ['my run', 'résumé', '数据 run', 'a+b=c&d?', "it's #1 (100%)", 'emoji 🎉', '~x', 'x' * 250]

HOWS = ['cut', 'bytes', 'json', 'nested', 'folder', 'link', 'gone']

def _damage(rng:random.Random, f:Path, outside:Path, how:str):
    "Damage file `f` the way `how` says: cut short, random bytes, JSON of the wrong shape, deeply nested, a folder, a link out, removed"
    data = f.read_bytes() if f.exists() else b'{}'
    f.unlink(missing_ok=True)
    if how == 'cut': f.write_bytes(data[:rng.randrange(len(data))])
    elif how == 'bytes': f.write_bytes(rng.randbytes(rng.choice([0, 1, 100, 5000])))
    elif how == 'json': f.write_text(json.dumps(rng.choice([[], 'x', 1, None, {'status': 3}, {'status': 'x', 'epochs': [1]},
                                                             {'status': 'x', 'epochs': [{'epoch': 1, 'file': '../../outside/secret.json'}]},
                                                             {'status': 'x', 'live_alerts': 5}, {'epoch': 1, 'file': 7}])))
    elif how == 'nested': f.write_text('[' * 100_000)
    elif how == 'folder': f.mkdir()
    elif how == 'link': f.symlink_to(outside/'secret.json')
    return how

@pytest.fixture(scope='module')
def served(tmp_path_factory):
    "A served folder of good runs under odd names, damaged runs and links out of it; a run and a file outside it hold the secret"
    rng = random.Random(17)
    base = tmp_path_factory.mktemp('fuzz')
    learn = digits_learner(cbs=ExplorerCallback(base/'real', every=5))
    with learn.no_bar(), learn.no_logging(): learn.fit(1)
    outside = base/'outside'; shutil.copytree(base/'real', outside)
    m = json.loads((outside/'run.json').read_text()); m['model'] = SECRET; (outside/'run.json').write_text(json.dumps(m))
    for f in ('epoch_0001.json', 'representation.json'): (outside/f).write_text(json.dumps({'schema': SECRET}))
    (outside/'secret.json').write_text(json.dumps({'secret': SECRET}))
    root = base/'root'; root.mkdir()
    for n in ['good'] + NAMES: shutil.copytree(base/'real', root/n)
    (root/'escape').symlink_to(outside, target_is_directory=True)                         # a run folder linked out
    shutil.copytree(base/'real', root/'linked')                                           # a run whose files link out
    for f in ('epoch_0001.json', 'representation.json', 'landscape.json'): (root/'linked'/f).unlink(missing_ok=True); (root/'linked'/f).symlink_to(outside/f if f != 'landscape.json' else outside/'secret.json')
    for n in ('.hidden', 'new\nline', 'tab\there', '~'): shutil.copytree(base/'real', root/n)   # names that are not run names
    damaged = []
    for i in range(NBAD):               # runs with one or two damaged files: run.json each way in turn, then at random
        p = root/f"bad {i}"; shutil.copytree(base/'real', p)
        todo = [('run.json', HOWS[i])] if i < len(HOWS) else [(f, rng.choice(HOWS)) for f in rng.sample(FILES, rng.choice([1, 2]))]
        damaged += [(p.name, f, _damage(rng, p/f, outside, how)) for f,how in todo]
    return root, damaged

def _segment(rng:random.Random)->str:
    "A random run name for a URL: good, damaged, odd, hostile (traversal, encoded, NUL, long) or random Unicode"
    pick = rng.random()
    if pick < 0.5: return urllib.parse.quote(rng.choice(['good', 'linked', 'escape'] + [f'bad {i}' for i in range(NBAD)] + NAMES), safe='')
    if pick < 0.8: return rng.choice(['..', '%2e%2e', '.%2e', '%2E%2E', '..%2f..%2foutside', 'good%2f..%2f..%2foutside', '~', '%7E', '.hidden',
                                      'new%0Aline', '%00', 'good%00', '%ff', 'bad%FF', 'x' * rng.choice([255, 256, 300, 5000]), '%2f',
                                      '..%5c..%5coutside', 'good%2F%2E%2E', 'escape%2f..', '%252e%252e', ''])
    return urllib.parse.quote(''.join(rng.choice('aé数 .-_~%#?&+/\\\x00\n🎉') for _ in range(rng.randrange(1, 40))), safe='')

def _path(rng:random.Random)->str:
    "A random request path with a random query string"
    pick = rng.random()
    if pick < 0.08: p = rng.choice(['/', '/static/app.js', '/static/app.css', '/static/' + rng.choice(['index.html', '..%2f..%2fpyproject.toml', 'x.js', '%2e%2e'])])
    elif pick < 0.15: p = '/api/runs' + rng.choice(['', '/', '//', '/.', '/%2e'])
    elif pick < 0.2: p = '/' + rng.choice(['..', '%2e%2e', 'api/..', 'api/runs/../..']) + '/outside/secret.json'
    else:
        rest = rng.choice(['run.json', 'representation.json', 'landscape.json', 'epochs', 'epochs/1', 'epochs/2', 'epochs/0', 'epochs/-1',
                           'epochs/' + '9' * rng.choice([10, 19, 5000]), 'epochs/1.5', 'history', 'steps', 'steps/series', 'steps/hist',
                           'steps/other', 'events', '../outside/secret.json', '%2e%2e%2f%2e%2e%2foutside%2fsecret.json', 'secret.json',
                           'epoch_0001.json', 'run.json/', 'run.json%00', ''])
        p = f"/api/runs/{_segment(rng)}/{rest}"
    if rng.random() < 0.3:
        keys = ['layer', 'kind', 'stats', 'start', 'stop', 'points', 'split', 'path', 'x', '%00', 'layer']
        vals = ['0', '1', 'conv', 'act', 'grad', 'loss', 'hyper', 'valid', 'mean,std', '-1', '1e9', '9' * 30, '%ff', '%00', '', 'é',
                'group 0', "' OR 1=1 --", '../x', 'x' * 3000]
        p += '?' + '&'.join(f"{rng.choice(keys)}={urllib.parse.quote(rng.choice(vals), safe='%')}" for _ in range(rng.randrange(1, 5)))
    return p

def _headers(rng:random.Random, port:int)->list:
    "Random headers: mostly the served Host, sometimes two, a foreign or no Host, an Origin (own, foreign, two), other odd ones"
    own,evil = f'127.0.0.1:{port}',rng.choice(['evil.example', f'evil.example:{port}', '127.0.0.1', f'localhost:{port}', '[::1]', ''])
    pick = rng.random()
    hs = ([('Host', own)] if pick < 0.75 else [('Host', own), ('Host', evil)] if pick < 0.85 else [('Host', evil), ('Host', own)] if pick < 0.93
          else [('Host', evil)] if pick < 0.97 else [])
    if rng.random() < 0.2: hs += [('Origin', rng.choice([f'http://{own}', f'http://{evil}', 'null', f'https://{own}']))
                                  for _ in range(rng.choice([1, 1, 2]))]
    for _ in range(rng.choice([0, 0, 1, 3])):
        hs.append(rng.choice([('Accept', '*/*'), ('Range', 'bytes=0-10'), ('Range', 'bytes=-5'), ('If-None-Match', '*'), ('Cookie', 'a=b'),
                              ('X-Forwarded-Host', 'evil.example'), ('X-Forwarded-For', '1.2.3.4'), ('Accept-Encoding', 'gzip'),
                              ('Connection', 'keep-alive'), ('Upgrade', 'websocket'), ('Expect', '100-continue'),
                              ('X-' + ''.join(rng.choices(string.ascii_letters, k=8)), ''.join(rng.choices(string.printable[:94], k=rng.randrange(200))))]))
    return hs

def _send(conn, method:str, path:str, headers:list, body:bytes|None):
    "Send one request as given (no header added), return (status, headers, body); an event stream is not read to its end"
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k,v in headers: conn.putheader(k, v)
    if body is not None: conn.putheader('Content-Length', str(len(body)))
    conn.endheaders(body)
    r = conn.getresponse()
    if r.getheader('content-type', '').startswith('text/event-stream'):       # endless: its first line, then the connection is closed
        return r.status,r.getheaders(),(r.fp.readline() if method != 'HEAD' else b''),True
    return r.status,r.getheaders(),r.read(),r.will_close

def test_fuzz_server(served):
    "Thousands of seeded random requests: no status of 500 or more, no answer holding what lies outside the served folder, and the server still answers"
    root,damaged = served
    rng = random.Random(1717)
    statuses,t0 = {},time.monotonic()
    with serve(root, port=0) as s:
        conn = None
        for i in range(N):
            method = rng.choices(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'PROPFIND'], [70, 12, 3, 2, 3, 3, 2, 2, 3])[0]
            path,headers = _path(rng),_headers(rng, s.port)
            body = rng.randbytes(rng.randrange(50)) if method in ('POST', 'PUT', 'PATCH') else None
            if conn is None: conn = http.client.HTTPConnection('127.0.0.1', s.port, timeout=10)
            what = f"request {i}: {method} {path[:200]} {headers}"
            try: st,hs,data,close = _send(conn, method, path, headers, body)
            except (http.client.HTTPException, ConnectionError) as e:   # the server may drop a connection, but must answer on a new one
                conn.close(); conn = http.client.HTTPConnection('127.0.0.1', s.port, timeout=10)
                try: st,hs,data,close = _send(conn, method, path, headers, body)
                except OSError as e: raise AssertionError(f"{what}: no answer ({e!r})") from None
            except TimeoutError as e: raise AssertionError(f"{what}: no answer ({e!r})") from None
            assert st < 500, f"{what} -> {st} {data[:300]!r}"
            assert SECRET.encode() not in data and not any(SECRET in v for _,v in hs), f"{what} -> {st}: answered from outside the served folder"
            loc = dict((k.lower(), v) for k,v in hs).get('location')
            assert loc is None or urllib.parse.urlsplit(loc).netloc in ('', f'127.0.0.1:{s.port}', f'localhost:{s.port}'), f"{what} -> {st} to {loc}"
            statuses[st] = statuses.get(st, 0) + 1
            if close: conn.close(); conn = None
        if conn is not None: conn.close()
        print(f"{N} requests in {time.monotonic() - t0:.1f} s: {dict(sorted(statuses.items()))}")
        runs = json.loads(urllib.request.urlopen(s.url + 'api/runs', timeout=10).read())['runs']
    ids = {r['id']: r for r in runs}
    assert set(ids) >= {'good', 'linked'} | set(NAMES) and not {'escape', '.hidden', 'new\nline', 'tab\there', '~'} & set(ids), sorted(ids)
    for n,f,how in damaged:
        if f == 'run.json' and how in ('cut', 'bytes', 'nested'): assert ids[n]['status'] == 'unreadable' and f"{n}/run.json" in ids[n]['error'], (n, how, ids[n])
    assert min(statuses.get(k, 0) for k in (200, 400, 403, 404, 405, 422)) >= 10, statuses   # it reached every route and every refusal
