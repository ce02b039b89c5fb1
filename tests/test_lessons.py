"Every library notebook reads as a lesson (issue 18): small exported cells, each followed by its test or example, short prose cells, nothing cited outside the repository"
import importlib.util, re
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location('nb_figures', ROOT/'scripts'/'nb_figures.py')
nb_figures = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(nb_figures)
LIBRARY = sorted(p for p in (ROOT/'nbs').glob('[0-9]*.ipynb'))

@pytest.mark.parametrize('nb', LIBRARY, ids=lambda p: p.name)
def test_notebook_reads_as_a_lesson(nb):
    f = nb_figures.figures(nb)
    assert f['longest_export'] <= 40, f"{nb.name}: an exported cell of {f['longest_export']} lines (split it: 40 at most)"
    assert f['longest_prose'] <= 150, f"{nb.name}: a prose cell of {f['longest_prose']} words (150 at most)"
    assert not f['outside'], f"{nb.name} cites files outside the repository: {f['outside']}"
    assert f['tested'] == f['exported'], (f"{nb.name}: {f['exported'] - f['tested']} of its {f['exported']} exported cells "
                                          "have no test or example right after them (the next code cell is exported too, or there is none)")

def test_the_figures_see_what_they_measure(tmp_path):
    "The measure itself: a long exported cell, a long prose cell, an outside reference and exported cells without a test are each found"
    import json
    code = lambda s: {'cell_type': 'code', 'source': s, 'metadata': {}}
    cells = [code('#| export\n' + 'x = 1\n' * 41),
             {'cell_type': 'markdown', 'source': 'Its test:', 'metadata': {}},   # prose between an export and its test
             code('assert x'),                                                   # tested
             code('#|exports\ny = 2'),                                          # the next code cell is exported: untested
             {'cell_type': 'markdown', 'source': 'word ' * 151 + ' see ../shared/NOTES.md', 'metadata': {}},
             code('#| export\nz = 3')]                                          # no code cell after it: untested
    p = tmp_path/'x.ipynb'; p.write_text(json.dumps({'cells': cells}))
    f = nb_figures.figures(p)
    assert (f['longest_export'], f['exported'], f['tested'], f['longest_prose'], f['outside']) == (42, 3, 1, 153, ['../shared/NOTES.md'])
