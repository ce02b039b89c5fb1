"""`nbdev-docs` needs Quarto, which cannot be installed everywhere (`scripts/docs.py` builds our site without it). Its
first half is nbdev's own processing of each notebook (`nbdev-proc-nbs`): it executes the cells that import or define
things, to render each exported symbol's documentation. That half runs anywhere; this test runs it on every notebook,
so that the notebooks stay ready for `nbdev-docs` where Quarto is installed: a cell that mixes imports with code that
needs earlier, unexecuted cells fails here."""
import os
from pathlib import Path
import pytest
from fastcore.xtras import working_directory

NBS = Path(__file__).resolve().parents[1]/'nbs'

@pytest.mark.parametrize('name', sorted(p.name for p in NBS.glob('*.ipynb')))
def test_nbdev_doc_processing(name, monkeypatch):
    from fastcore.nbio import read_nb
    from nbdev.processors import FilterDefaults
    monkeypatch.setenv('IN_TEST', '1')
    with working_directory(NBS):
        nb = read_nb(NBS/name)
        FilterDefaults()(nb)                     # processes in place; raises on a cell that fails
    assert nb.cells
