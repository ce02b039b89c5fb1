"Findings told where a fastai user reads (issue 46): under the progress table, in a script's output and in a notebook, from rank 0 only"
import json, os, re, subprocess, sys, textwrap
from pathlib import Path
import pytest
from fastexplorer.formats import life_key

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT/'tests'/'output'

# Three fits of the digits CNN in one interpreter, as a user's script runs them: a softmax before the cross-entropy,
# lr 10, and a healthy one-cycle fit; each case's output follows a `=== case` line
SCRIPT = textwrap.dedent('''
    import sys
    from torch import nn
    from fastexplorer.all import *
    from fastai.callback.schedule import fit_one_cycle
    for case in sys.argv[2:]:
        name,verbose = case.split(':')
        print(f'=== {case}', flush=True)
        learn = digits_learner(cbs=ExplorerCallback(f'{sys.argv[1]}/{name}{verbose}', overwrite=True, verbose=int(verbose)))
        if name == 'softmax':
            learn.model = nn.Sequential(*learn.model, nn.Softmax(-1))
            learn.fit(1, 1e-3)
        elif name == 'lr10': learn.fit(3, 10)
        else: learn.fit_one_cycle(2, 1e-2)
''')

def lines(out:str)->list:
    "What a terminal shows of `out`: each line's last carriage-return segment (fastprogress redraws its bar in place)"
    return [l.split('\r')[-1] for l in out.split('\n')]

def cases(stdout:str)->dict:
    "`{case: its lines}` from the script's output"
    res,cur = {},None
    for l in lines(stdout):
        if l.startswith('=== '): cur = res.setdefault(l[4:], [])
        elif cur is not None: cur.append(l)
    return res

def rows(ls:list)->dict:
    "`{epoch: index of its row}` in fastai's table as printed in a log: a line of the epoch number, then numbers"
    return {int(l.split()[0]): i for i,l in enumerate(ls) if re.match(r'^\d+\s+[\d.]+\s+[\d.]+', l)}

def blocks(ls:list)->list:
    "`[(index, title, [(severity, kind)])]` of what fastexplorer told"
    res = []
    for i,l in enumerate(ls):
        if l.startswith('fastexplorer: '): res.append((i, l[len('fastexplorer: '):], []))
        elif res and (m := re.match(r'^  (error|warning|info|resolved)\s+(\w+)', l)): res[-1][2].append(m.groups())
    return res

@pytest.fixture(scope='module')
def script(tmp_path_factory):
    "The script's output, and its run folders"
    d = tmp_path_factory.mktemp('console')
    r = subprocess.run([sys.executable, '-c', SCRIPT, str(d), 'softmax:1', 'lr10:1', 'lr10:0', 'healthy:1', 'healthy:2'],
                       cwd=d, capture_output=True, text=True, timeout=900, env={**os.environ, 'PYTHONWARNINGS': ''})
    assert r.returncode == 0, r.stderr[-3000:]
    (OUT/'console_script.txt').write_text('\n'.join(l for l in lines(r.stdout) if l.strip()) + '\n')
    return cases(r.stdout),d

def test_a_softmax_before_cross_entropy_is_told_before_the_first_batch(script):
    "The preflight's error (finding, evidence, fix) is printed before fastai's first row, and once"
    out,_ = script
    ls = out['softmax:1']
    told = blocks(ls)
    assert len(told) == 1 and told[0][1].startswith('the preflight found 1 error'), told
    assert told[0][2] == [('error', 'output_activation')], told
    assert told[0][0] < rows(ls)[0], ls
    text = '\n'.join(ls[told[0][0]:rows(ls)[0]])
    assert 'Softmax' in text and 'fix: ' in text, text

def test_lr_10_is_told_at_the_end_of_the_epoch_that_raises_it(script):
    "Each finding an epoch's file holds for the first time is told right after that epoch's row; the learning rate's among them"
    out,d = script
    ls = out['lr10:1']
    at,told = rows(ls),blocks(ls)
    first = {}
    for e in range(1, 4):
        doc = json.loads((d/'lr101'/f'epoch_{e:04d}.json').read_text())
        for a in doc['alerts']:
            if a.get('state', 'active') == 'active' and a['severity'] in ('error', 'warning'):
                first.setdefault(life_key(a), (e, a['kind']))
    lr = {k: v for k,v in first.items() if v[1] in ('lr_too_high', 'loss_diverging')}
    assert lr, f"no learning-rate finding at lr 10: {first}"
    for e,kind in first.values():
        block = [b for b in told if b[1].startswith(f'epoch {e}:')]
        assert len(block) == 1 and (b := block[0])[0] > at[e - 1] and b[0] < at.get(e, len(ls)), (e, told, at)
        assert kind in {k for _,k in b[2]}, (kind, b)
    kinds = [k for b in told for _,k in b[2] if _ != 'resolved']
    assert len(kinds) == len(set(kinds)), f"a finding told twice while active: {told}"

def test_verbose_0_tells_nothing(script):
    "`ExplorerCallback(verbose=0)` prints nothing of ours, even at lr 10"
    out,_ = script
    assert not blocks(out['lr10:0']), out['lr10:0']

def test_a_healthy_fit_prints_nothing_or_a_quiet_line(script):
    "A healthy one-cycle fit prints nothing of ours at the default `verbose`; at `verbose=2`, one quiet line per epoch"
    out,d = script
    for e in (1, 2):
        doc = json.loads((d/'healthy1'/f'epoch_{e:04d}.json').read_text())
        assert not [a for a in doc['alerts'] if a['severity'] in ('error', 'warning')], doc['alerts']
    assert not blocks(out['healthy:1']), out['healthy:1']
    told = blocks(out['healthy:2'])
    assert told[0][1].startswith('preflight on one batch: ') and told[0][1].endswith(' ok'), told
    assert [t.split(':')[0] for _,t,_ in told[1:]] == ['epoch 1', 'epoch 2'], told
    assert all(s == 'info' for _,_,fs in told for s,_ in fs), told
