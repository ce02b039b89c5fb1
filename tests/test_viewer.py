"""The light viewer (issue 33): `fastexplorer --help`, `serve` and `report` read run folders without torch or fastai, so
a laptop that only looks at runs copied from a GPU box starts the explorer in a second."""
import json, shutil, subprocess, sys, textwrap
from pathlib import Path
import pytest
from fastai.callback.progress import ProgressCallback  # noqa: F401  (patches `Learner.no_bar`)
from fastexplorer.cli import digits_learner
from fastexplorer.callback import ExplorerCallback

TRAINING = ('torch', 'fastai')
CLI = shutil.which('fastexplorer') or pytest.fail("the `fastexplorer` console script is not installed: pip install -e "
                                                "'.[dev]'", pytrace=False)

def _python(code:str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=120)

@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
    "A run of two epochs of the digits learner, with its step database"
    p = tmp_path_factory.mktemp('viewer')/'run'
    learn = digits_learner()
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2, cbs=ExplorerCallback(p, every=4, valid=True))
    return p

def test_help_goes_to_stdout_without_a_version_line(tmp_path):
    "`--help` of the script and of each command: on stdout, exit status 0, no stray `fastexplorer 0.0.1` line"
    for args in (['--help'], ['demo', '--help'], ['serve', '--help'], ['report', '--help']):
        r = subprocess.run([CLI, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stderr == '' and r.stdout.startswith('usage: fastexplorer'), (args, r.stdout, r.stderr)
        assert 'fastexplorer 0.' not in r.stdout, (args, r.stdout)
    r = subprocess.run([CLI, 'nonsense'], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == '' and r.stderr.startswith('usage: fastexplorer COMMAND'), r

def test_version_and_an_unknown_command(tmp_path):
    "`fastexplorer --version` prints the package's version; `fastexplorer bogus` names the command and the known ones, exit status 2 (issue 46)"
    from fastexplorer import __version__
    for flag in ('--version', '-V'):
        r = subprocess.run([CLI, flag], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stdout, r.stderr) == (0, f"fastexplorer {__version__}\n", ''), (flag, r)
    r = subprocess.run([CLI, 'bogus'], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == '', r
    assert r.stderr.splitlines()[-1] == "fastexplorer: error: unknown command 'bogus'; the commands are demo, serve, report", r.stderr

def test_serve_and_report_import_no_training_code(run_dir, tmp_path):
    "The server answers on a real run and the report is written, with neither torch nor fastai imported"
    r = _python(f'''
        import sys, json, urllib.request
        from fastexplorer.cli import main
        main(['--help'])
        from fastexplorer.explorer import ExplorerServer, report
        from fastexplorer.run import load_run
        srv = ExplorerServer({str(run_dir)!r}, port=0)
        try:
            runs = json.load(urllib.request.urlopen(srv.url + 'api/runs', timeout=30))['runs']
            steps = urllib.request.urlopen(srv.url + 'api/runs/' + runs[0]['id'] + '/steps', timeout=30).status
        finally: srv.stop()
        report({str(run_dir)!r}, 'report.html')
        run = load_run({str(run_dir)!r})
        print(json.dumps({{'runs': len(runs), 'steps': steps, 'epochs': len(run.epochs), 'rows': len(run.df),
                          'loaded': sorted(m for m in sys.modules if m.split('.')[0] in {TRAINING!r})}}))
    ''', tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got['loaded'] == [], got['loaded'][:10]
    assert (got['runs'], got['steps'], got['epochs']) == (1, 200, 2) and got['rows'] > 0, got
    assert (tmp_path/'report.html').stat().st_size > 10_000

def test_run_files_and_report_follow_the_umask(run_dir, tmp_path):
    "Files of a run and a report are created as any new file is (0644 under umask 022), not 0600: a copy in a shared folder is readable"
    from fastexplorer.explorer import report
    import os
    old = os.umask(0o022)
    try: out = report(run_dir, tmp_path/'r.html')
    finally: os.umask(old)
    modes = {f.name: oct(f.stat().st_mode & 0o777) for f in [*run_dir.iterdir(), out] if f.is_file() and f.suffix in ('.json', '.html', '.sqlite')}
    assert modes and set(modes.values()) == {'0o644'}, modes
