"The original fastexplorer client (fastexplorer-js) against our runs: the seed's format as its tree draws it, and its websocket."
import io, json
import numpy as np, pytest, torch, torchvision
from fastai.learner import Learner
from torch import nn
from fastexplorer.all import *
from fastexplorer.cli import digits_learner, digits_cnn
from fastexplorer.legacy import legacy_view, LEGACY_EVENTS, LEGACY_ORIGIN

websockets = pytest.importorskip('websockets.sync.client')

def client_rows(d:dict, segs:tuple=())->list:
    "`(title, heatmap path, is a leaf)` of every row the client draws: each node, titled `name [shape]`, its path the `/`-joined `xtra.path`s"
    path = segs + ((d['xtra']['path'],) if 'path' in d.get('xtra', {}) else ())
    shape = d.get('xtra', {}).get('shape')
    res = [(d['name'] + (f" [{','.join(map(str, shape))}]" if shape else ''), '/'.join(path), 'nodes' not in d)]
    for c in d.get('nodes', []): res += client_rows(c, path)
    return res

def _check(model, doc, rows_n, paths_n):
    "The contract: rows and distinct heatmap paths as the issue counted them on the original, leaves where a module has no child"
    rows = client_rows(doc)
    assert len(rows) == rows_n and len({p for _,p,_ in rows}) == paths_n
    mods = dict(model.named_modules())
    assert {p for _,p,_ in rows} - {''} == {n.replace('.', '/') for n in mods if n}    # every module's heatmap path, nothing else
    for (title,path,leaf) in rows[3:-1]:
        m = mods[path.replace('/', '.')]
        assert leaf == (not any(True for _ in m.children())), path
    names = [t.split(' [')[0] for t,_,_ in rows]
    assert names[:3] == [doc['name'], 'Input', type(model).__name__] and names[-1] == 'Output'
    return rows

def test_digits_cnn_as_the_client_draws_it():
    learn = digits_learner()
    doc = json.loads(learn.to_representation().to_legacy_json())
    rows = _check(learn.model, doc, 15, 12)
    assert rows[3][0] == '0_Sequential [64,16,8,8]' and rows[4] == ('0_Conv2d [64,16,8,8]', '0/0', True)
    conv = doc['nodes'][1]['nodes'][0]['nodes'][0]
    assert conv['xtra'] == {'path': '0', 'params': 144, 'trainable': True, 'shape': [64, 16, 8, 8]}
    assert doc['xtra'] == {'open': True, 'shape': None} and doc['nodes'][1]['xtra'] == {'open': True, 'shape': [64, 10]}
    assert doc['nodes'][0]['xtra'] == {'shape': [64, 1, 8, 8]} and doc['nodes'][2]['xtra'] == {'shape': [64, 10]}

def test_resnet18_as_the_client_draws_it():
    m = torchvision.models.resnet18(weights=None)
    doc = json.loads(represent(m, torch.randn(1, 3, 64, 64)).to_legacy_json())
    rows = _check(m, doc, 71, 68)
    layer1 = doc['nodes'][1]['nodes'][4]
    assert layer1['name'] == 'layer1' and [n['name'] for n in layer1['nodes']] == ['0_BasicBlock', '1_BasicBlock']
    assert ('conv1 [1,64,32,32]', 'conv1', True) in rows
    # a frozen layer says so as the seed did (a boolean), and its count is exact
    m.fc.requires_grad_(False)
    fc = json.loads(represent(m, torch.randn(1, 3, 64, 64)).to_legacy_json())['nodes'][1]['nodes'][-1]
    assert fc['xtra'] == {'path': 'fc', 'params': 512 * 1000 + 1000, 'trainable': False, 'shape': [1, 1000]}

def test_not_a_probed_representation():
    with pytest.raises(ValueError, match='no model node'): legacy_view({'name': 'x', 'type': 'Module', 'nodes': []})

@pytest.fixture(scope='module')
def digits_run(tmp_path_factory):
    root = tmp_path_factory.mktemp('legacy')
    learn = digits_learner(cbs=ExplorerCallback(root/'digits'))
    learn.fit(1, 1e-3)
    return root, learn

def _head(frame:bytes)->dict:
    "The message header of a binary frame, read as the client's numpy reader reads it (its first 100 bytes)"
    return json.loads(frame[:100].decode().replace("'", '"').replace(', }', '}'))

def _connect(srv, origin=None, run=''):
    return websockets.connect(srv.url.replace('http://', 'ws://') + 'ws' + (f'?run={run}' if run else ''), origin=origin, open_timeout=10)

def test_websocket_speaks_the_client_protocol(digits_run, capfd):
    root,learn = digits_run
    with serve(root, port=0, legacy_client=True) as srv, _connect(srv, origin=LEGACY_ORIGIN) as ws:
        ws.send(json.dumps({'type': 'CONNECTED', 'payload': {'client': 'web_client'}}))
        msg = json.loads(ws.recv(timeout=10))
        assert msg['type'] == 'socket/socketReceiveData' and isinstance(msg['payload']['data'], str)
        assert json.loads(msg['payload']['data']) == legacy_view(json.loads((root/'digits'/'representation.json').read_text()))
        ws.send(json.dumps({'type': 'socket/sendEvent', 'payload': {'event': 'GET_HEATMAP', 'path': '0/0'}}))
        frames = [ws.recv(timeout=10), ws.recv(timeout=10)]       # the input sample first (as the original), then the heatmap
        heads = [_head(f) for f in frames]
        assert heads == [{'type': LEGACY_EVENTS['input']}, {'type': LEGACY_EVENTS['heatmap'], 'path': '0/0'}]
        im,hm = (np.load(io.BytesIO(f[128:])) for f in frames)
        assert im.shape == (1, 8, 8) and hm.shape == (8, 8) == tuple(learn.to_representation().find('0.0').xtra['shape'][2:])
        assert hm.dtype == np.float32 and hm.min() == 0 and hm.max() == 1
        ws.send(json.dumps({'type': 'socket/sendEvent', 'payload': {'event': 'GET_HEATMAP', 'path': '3'}}))   # Flatten: not an image
        assert json.loads(ws.recv(timeout=10)) == {'type': LEGACY_EVENTS['no_heatmap'], 'payload': {'path': '3'}}
        ws.send(json.dumps({'type': 'socket/sendEvent', 'payload': {'event': 'NOPE'}}))
        assert json.loads(ws.recv(timeout=10))['type'] == LEGACY_EVENTS['invalid']
        ws.send('not json')                                       # ignored, as the original did
        ws.send(b'\x00\x01binary'); ws.send('[1, 2]'); ws.send('"text"')   # a binary frame, JSON that is not an object: ignored
        ws.send(json.dumps({'type': 'socket/sendEvent', 'payload': {'event': 'GET_HEATMAP', 'path': '0/0'}}))
        assert np.array_equal(np.load(io.BytesIO(ws.recv(timeout=10)[128:])), hm)     # the same sample: no new input
        ws.send(json.dumps({'type': 'socket/sendEvent', 'payload': {'event': 'LOAD_INPUT'}}))
        frames = [ws.recv(timeout=10), ws.recv(timeout=10)]       # the next sample, then the last layer asked for, on it
        assert [_head(f)['type'] for f in frames] == [LEGACY_EVENTS['input'], LEGACY_EVENTS['heatmap']]
        im2,hm2 = (np.load(io.BytesIO(f[128:])) for f in frames)
        assert hm2.shape == hm.shape and not np.array_equal(im2, im) and not np.array_equal(hm2, hm)
    assert 'Traceback' not in capfd.readouterr().err          # nothing the client sent made the server print one

def test_websocket_origins(digits_run):
    root,_ = digits_run
    def refused(srv, origin):
        try:
            with _connect(srv, origin=origin) as ws: ws.send('{}'); ws.recv(timeout=5)
        except Exception as e: return 'HTTP 403' in str(e) or '1008' in str(e) or 'rejected' in str(e)
        return False
    with serve(root, port=0) as srv:                   # default: no /ws at all, and a foreign origin refused
        assert refused(srv, LEGACY_ORIGIN) and refused(srv, None)
    with serve(root, port=0, legacy_client=True) as srv:
        assert refused(srv, 'https://evil.example') and refused(srv, 'http://renato145.github.io') and refused(srv, LEGACY_ORIGIN + '.evil.example')
        with _connect(srv, origin=LEGACY_ORIGIN) as ws:
            ws.send('{"type": "CONNECTED"}'); assert json.loads(ws.recv(timeout=10))['type'] == LEGACY_EVENTS['data']
        with _connect(srv, origin=srv.url.rstrip('/')) as ws:     # our own page's origin
            ws.send('{"type": "CONNECTED"}'); assert json.loads(ws.recv(timeout=10))['type'] == LEGACY_EVENTS['data']

def test_explore_and_cli_turn_it_on(digits_run):
    "`learn.explore(legacy_client=True)` serves the websocket; `fastexplorer serve --legacy-client` parses to it"
    from fastcore.script import anno_parser
    from fastexplorer.cli import serve_runs
    root,learn = digits_run
    url = learn.explore(port=0, inline=False, legacy_client=True)
    try:
        with websockets.connect(url.replace('http://', 'ws://') + 'ws', origin=LEGACY_ORIGIN, open_timeout=10) as ws:
            ws.send('{"type": "CONNECTED"}'); assert json.loads(ws.recv(timeout=10))['type'] == LEGACY_EVENTS['data']
    finally: learn.explorer.server.stop()
    assert anno_parser(serve_runs).parse_args([str(root), '--legacy-client']).legacy_client is True
    assert anno_parser(serve_runs).parse_args([str(root)]).legacy_client is False

def test_websocket_names_a_damaged_epoch_file(digits_run, tmp_path):
    "A damaged epoch file: the client gets an error message naming it (from the served folder), and the socket stays open"
    import shutil
    root,_ = digits_run
    shutil.copytree(root/'digits', tmp_path/'digits')
    (tmp_path/'digits'/'epoch_0001.json').write_text('{"schema": "fastex')
    with serve(tmp_path, port=0, legacy_client=True) as srv, _connect(srv, origin=LEGACY_ORIGIN) as ws:
        ws.send('{"type": "CONNECTED"}'); assert json.loads(ws.recv(timeout=10))['type'] == LEGACY_EVENTS['data']
        ws.send(json.dumps({'type': 'socket/sendEvent', 'payload': {'event': 'GET_HEATMAP', 'path': '0/0'}}))
        for _ in range(2):       # the input sample, then the heatmap: each an error naming the file
            msg = json.loads(ws.recv(timeout=10))
            assert msg['type'] == LEGACY_EVENTS['error'] and msg['payload']['msg'].startswith('digits/epoch_0001.json: not valid JSON'), msg
