"A newcomer's first hour: the README's Python blocks run as pasted, the demo and the tour repeat their numbers, and nothing prints a warning that is not about the user's own input"
import json, os, re, shutil, subprocess, sys, textwrap
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = shutil.which('fastexplorer') or pytest.fail("the `fastexplorer` console script is not installed: pip install -e "
                                                "'.[dev]'", pytrace=False)
README = ROOT/'README.md'

# Runs the blocks in one fresh interpreter, as a notebook would: each block's last expression is printed
RUNNER = textwrap.dedent('''
    import ast, json, sys
    g = {'__name__': '__main__'}
    for i,b in enumerate(json.load(open(sys.argv[1]))):
        print(f'=== block {i}', flush=True)
        tree = ast.parse(b)
        last = tree.body.pop() if isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, f'<README block {i}>', 'exec'), g)
        if last is not None:
            v = eval(compile(ast.Expression(last.value), f'<README block {i}>', 'eval'), g)
            if v is not None: print(repr(v), flush=True)
''')

def python_blocks(md:str)->list: return re.findall(r'^```python\n(.*?)\n```$', md, re.S | re.M)

def _run(args, cwd, timeout=900):
    env = {**os.environ, 'PYTHONWARNINGS': ''}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)

def _numbers(out:str)->str:
    "What a run printed, as a terminal shows it, without timings and progress bars"
    lines = []
    for line in out.split('\n'):
        line = line.split('\r')[-1].replace('█', '')
        line = re.sub(r'Epoch \d+/\d+ :.*', '', line)                 # fastprogress's bars (updated by time)
        line = re.sub(r'\b\d\d:\d\d\b', 'mm:ss', line).rstrip()
        if line: lines.append(line)
    return '\n'.join(lines)

def _readme_run(tmp_path, name):
    blocks = python_blocks(README.read_text())
    (tmp_path/'blocks.json').write_text(json.dumps(blocks))
    (tmp_path/'runner.py').write_text(RUNNER)
    cwd = tmp_path/name; cwd.mkdir()
    return _run([sys.executable, str(tmp_path/'runner.py'), str(tmp_path/'blocks.json')], cwd)

def test_readme_blocks_run_in_order_twice_alike(tmp_path):
    "Every Python block of the README runs as pasted, in order, in a fresh interpreter; a second run prints the same numbers"
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 8 and 'import' in blocks[0], "the README's first block must show the imports"
    a,b = _readme_run(tmp_path, 'a'),_readme_run(tmp_path, 'b')
    for r in (a, b): assert r.returncode == 0, f"a README block failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert a.stdout.count('=== block') == len(blocks)
    assert _numbers(a.stdout) == _numbers(b.stdout), "the tour printed different numbers on a second run"

NUM = re.compile(r'(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])')
REL,ABS = 0.02,1e-3   # a printed float may differ by 2% (or 1e-3) from the README's: other CPUs, other kernels; whole numbers not at all

def fences(md:str)->list:
    "`[(info, body, first line, last line)]` of the fenced blocks of markdown `md`, in order"
    res,cur = [],None
    for i,line in enumerate(md.split('\n')):
        if cur is None and line.startswith('```'): cur = (line[3:].strip(), [], i)
        elif cur is not None and line == '```': res.append((cur[0], '\n'.join(cur[1]), cur[2], i)); cur = None
        elif cur is not None: cur[1].append(line)
    return res

def readme_outputs(md:str)->dict:
    "`{python block index: the output the README shows for it}`: the plain fenced blocks right after a Python block"
    res,k,last = {},-1,None
    lines = md.split('\n')
    for info,body,a,b in fences(md):
        if info == 'python': k,last = k + 1,b; continue
        if not info and last is not None and not ''.join(lines[last + 1:a]).strip():
            res[k] = (res[k] + '\n' if k in res else '') + body; last = b
        else: last = None
    return res

def printed(stdout:str)->dict:
    "`{block index: what it printed}` from the runner's output"
    return {int(m.group(1)): m.group(2).strip('\n') for m in re.finditer(r'^=== block (\d+)\n(.*?)(?=^=== block |\Z)', stdout, re.S | re.M)}

def same_output(want:str, got:str)->str|None:
    "`None` if `got` prints what `want` shows (timings aside; floats within `REL`/`ABS`), else what differs"
    bars = lambda s: re.sub(r'\|[█-]*\| [\d.]+% \[[^\]\n]*\]', '', s)   # fastprogress's bars, which the README leaves out
    norm = lambda s: re.sub(r'\s+', ' ', bars(_numbers(s))).strip()   # a repr wraps where IPython's display did not, and tables pad
    w,g = norm(want),norm(got)
    if NUM.sub('#', w) != NUM.sub('#', g): return f"the text differs:\n{w[:1500]}\n---\n{g[:1500]}"
    for a,b in zip(NUM.findall(w), NUM.findall(g)):
        whole = not re.search(r'[.eE]', a + b)
        if (a != b) if whole else abs(float(a) - float(b)) > max(ABS, REL * abs(float(a))): return f"{a} printed as {b}"
    return None

def test_readme_outputs_are_what_the_code_prints(tmp_path):
    "Each output block of the README is what its Python block prints now (the README cannot go stale): text alike, numbers close"
    md = README.read_text()
    want,r = readme_outputs(md),_readme_run(tmp_path, 'out')
    assert r.returncode == 0, r.stderr[-3000:]
    got = printed(r.stdout)
    assert len(want) >= 5, f"only {len(want)} README blocks show an output"
    bad = {k: d for k,w in want.items() if (d := same_output(w, got.get(k, ''))) is not None}
    assert not bad, '\n\n'.join(f"README block {k}: {d}" for k,d in bad.items())

def test_a_hand_edited_output_is_caught():
    "The comparison catches a changed number, a changed whole number and changed text, and lets a timing or a tiny float difference pass"
    shown = "epoch  train_loss  time\n0      0.657065    00:03\nstep 14"
    assert same_output(shown, "epoch  train_loss  time\n0      0.657071    00:05\nstep 14") is None
    for edited in (shown.replace('0.657065', '0.757065'), shown.replace('14', '15'), shown.replace('step', 'epoch')):
        assert same_output(edited, shown) is not None, edited

def test_demo_repeats_its_numbers_and_prints_no_warning(tmp_path):
    "`fastexplorer demo --no-serve` twice: the same losses, metrics and epoch files, and no warning"
    outs = []
    for k in 'ab':
        r = _run([CLI, 'demo', '--no-serve', '--path', str(tmp_path/'run'), '--epochs', '2'], tmp_path)
        assert r.returncode == 0, r.stderr
        assert 'Warning' not in r.stdout + r.stderr, r.stderr
        outs.append(_numbers(r.stdout))
        rec = [{k: v for k,v in e['recorder'].items() if k != 'time'} for e in
               (json.loads((tmp_path/'run'/f'epoch_{i:04d}.json').read_text()) for i in (1, 2))]
        outs.append(rec)
    assert outs[0] == outs[2] and outs[1] == outs[3]

def test_demo_prints_fastais_table_in_a_log(tmp_path):
    "`fastexplorer demo` into a log file (issue 46): fastai's progress table as plain lines, a header then one aligned row per epoch, never bare lists"
    r = _run([CLI, 'demo', '--no-serve', '--path', str(tmp_path/'run'), '--epochs', '2'], tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    names = ['epoch', 'train_loss', 'valid_loss', 'accuracy', 'time']
    at = [i for i,l in enumerate(lines) if l.split() == names]
    assert len(at) == 1 and not any(l.startswith('[') for l in lines), r.stdout
    header,rows = lines[at[0]],lines[at[0] + 1:at[0] + 3]
    starts = [header.index(n) for n in names]   # each value starts under its column's name
    cells = [[row[s:].split()[0] for s in starts] for row in rows]
    assert [c[0] for c in cells] == ['0', '1'] and all(re.fullmatch(r'\d\d:\d\d', c[-1]) for c in cells), rows
    assert all(re.fullmatch(r'\d+\.\d{6}', v) for c in cells for v in c[1:-1]), rows

def test_readme_says_how_long_the_tests_take_and_gives_a_quick_subset():
    "The README (issue 46) gives the test command's duration and a quick pytest subset a contributor runs first, of test files that exist and need no browser"
    md = README.read_text()
    assert re.search(r'`bash scripts/test\.sh`[^.]*about \d+–\d+ minutes on a 2-core machine', md), 'the test command\'s duration'
    quick = [b for b in re.findall(r'^```sh\n(.*?)\n```$', md, re.S | re.M) if b.startswith('python -m pytest')]
    assert len(quick) == 1, quick
    files = re.findall(r'tests/\S+\.py', quick[0])
    assert len(files) >= 5 and all((ROOT/f).is_file() for f in files) and 'tests/test_browser.py' not in files, files

def test_help_prints_no_warning(tmp_path):
    "`fastexplorer --help` prints its usage and nothing else"
    r = _run([CLI, '--help'], tmp_path)
    assert r.returncode == 0 and (r.stdout + r.stderr).startswith('usage: fastexplorer COMMAND'), r.stderr
    assert 'Warning' not in r.stdout + r.stderr, r.stderr

CHANGES = textwrap.dedent('''
    import json
    from torch import nn
    from fastai.learner import Learner, defaults
    before = {'callbacks': list(defaults.callbacks), 'learner': dict(vars(Learner)), 'module': dict(vars(nn.Module))}
    from fastexplorer.all import *
    learn = digits_learner()
    learn.to_representation()
    with learn.no_logging(): learn.fit(1, 1e-2, cbs=ExplorerCallback('run', overwrite=True))
    learn.loss_landscape(n=3, progress=False)
    def changed(old, new): return sorted(k for k in set(old) | set(new) if old.get(k) is not new.get(k))
    print(json.dumps({'callbacks': [c.__name__ for c in defaults.callbacks] if defaults.callbacks != before['callbacks'] else None,
                      'learner': changed(before['learner'], dict(vars(Learner))),
                      'module': changed(before['module'], dict(vars(nn.Module)))}))
''')

def test_importing_changes_no_fastai_behaviour(tmp_path):
    "Importing fastexplorer and using it adds its own methods and changes nothing else in fastai (default callbacks included)"
    r = _run([sys.executable, '-c', CHANGES], tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res == {'callbacks': None, 'learner': ['explore', 'loss_landscape', 'preflight', 'to_representation'], 'module': ['to_representation']}, res
