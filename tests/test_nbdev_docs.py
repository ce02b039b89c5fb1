"""`nbdev-docs` needs Quarto, which cannot be installed everywhere (`scripts/docs.py` builds our site without it). Its
first half is nbdev's own processing of each notebook (`nbdev-proc-nbs`): it executes the cells that import or define
things, to render each exported symbol's documentation. That half runs anywhere; this test runs it on every notebook,
so that the notebooks stay ready for `nbdev-docs` where Quarto is installed: a cell that mixes imports with code that
needs earlier, unexecuted cells fails here."""
import os, warnings
from pathlib import Path
import pytest
from fastcore.xtras import working_directory

NBS = Path(__file__).resolve().parents[1]/'nbs'
# imports left in a test cell on purpose: loading dynamo earlier would change what the notebook's other cells test
MIXED_ON_PURPOSE = {'03ea_training.ipynb': 'import torch._dynamo.eval_frame'}

@pytest.mark.parametrize('name', sorted(p.name for p in NBS.glob('*.ipynb')))
def test_nbdev_doc_processing(name, monkeypatch):
    from fastcore.nbio import read_nb
    from nbdev.processors import FilterDefaults
    monkeypatch.setenv('IN_TEST', '1')
    with working_directory(NBS), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        nb = read_nb(NBS/name)
        FilterDefaults()(nb)                     # processes in place; raises on a cell that fails
    assert nb.cells
    mixed = [str(x.message) for x in w if 'imports and other code' in str(x.message)]
    if name in MIXED_ON_PURPOSE: mixed = [m for m in mixed if MIXED_ON_PURPOSE[name] not in m]
    assert not mixed, f"{name}: a cell mixes imports with code (nbdev runs the imports alone): move them to the hidden import cell\n{mixed[0]}"

def test_show_doc_renderer():
    "`show_doc` with the renderer of pyproject.toml: heading, the signature as called, docstring, the documented parameters"
    from nbdev.showdoc import show_doc
    from fastai.learner import Learner
    from fastexplorer.all import ExplorerCallback, Run, digits_learner
    syms = digits_learner, ExplorerCallback, ExplorerCallback.add_stat, Learner.to_representation, Run.df
    with working_directory(NBS): md = {o: show_doc(o)._repr_markdown_() for o in syms}   # where nbdev finds its config
    d = md[digits_learner]
    assert d.startswith('### digits\\_learner\n'), d
    assert '```python\ndigits_learner(bs:int=64, seed:int=42, **kwargs)\n```' in d, d   # no return annotation: `cli` imports no fastai
    assert '| parameter | type | default | description |\n|---|---|---|---|\n| <code>bs</code> | <code>int</code> | <code>64</code> | batch size |' in d, d
    assert '| <code>**kwargs</code> |  |  | passed to <code>Learner</code> |' in d and 'Returns' not in d, "a `**kwargs` docment is its row's"
    c = md[ExplorerCallback]
    assert "```python\nExplorerCallback(\n    path='runs/run',\n    every:int=10,\n    layers=None," in c, 'a class as called, types as written'
    assert 'NoneType' not in c and 'def ' not in c, c
    a = md[ExplorerCallback.add_stat]
    assert "ExplorerCallback.add_stat(f, on:str='out', name:str | None=None)" in a, 'a patched method under its class'
    assert '| parameter' not in a, 'no table when no parameter is documented'
    assert 'Learner.to_representation(b=None)->Representation' in md[Learner.to_representation]
    assert '```python\nRun.df: pd.DataFrame\n```\n\nOne row per epoch' in md[Run.df], 'a property: its type and docstring'
