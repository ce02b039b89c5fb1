"A newcomer's first hour: the README's Python blocks run as pasted, the demo and the tour repeat their numbers, and nothing prints a warning that is not about the user's own input"
import json, os, re, shutil, subprocess, sys, textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = shutil.which('fastexplorer') or sys.exit("the `fastexplorer` console script is not installed: pip install -e '.[dev]'")
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
