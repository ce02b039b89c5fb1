"""How each notebook reads as a lesson: the figures issue 18 compares with fastai's and nbdev's own notebooks.

Usage: python scripts/nb_figures.py [nbs/X.ipynb ...]   (default: every notebook in nbs/)

Per notebook: words of prose per word of code; exported cells (`#| export`, `#| exports`); the longest of them, in lines;
how many exported cells are followed by a test or an example (the next code cell is not exported); the longest prose
cell, in words; and the prose cells that point outside the repository (`../` links to files that are not notebooks).
"""
import json, re, sys
from pathlib import Path

def _src(c): return ''.join(c['source'])
def _exported(c): return c['cell_type'] == 'code' and re.match(r'\s*#\|\s*exports?\b', _src(c)) is not None

def figures(path)->dict:
    "The lesson figures of the notebook at `path`"
    cells = json.loads(Path(path).read_text())['cells']
    code = [c for c in cells if c['cell_type'] == 'code']
    prose = [c for c in cells if c['cell_type'] == 'markdown']
    words = lambda cs: sum(len(_src(c).split()) for c in cs)
    ex = [i for i,c in enumerate(cells) if _exported(c)]
    def followed(i):
        nxt = next((c for c in cells[i+1:] if c['cell_type'] == 'code'), None)
        return nxt is not None and not _exported(nxt)
    outside = [m for c in prose for m in re.findall(r'\.\./[\w./-]+', _src(c)) if not m.split('#')[0].endswith(('.ipynb', '.png'))]
    return dict(notebook=Path(path).name, prose_per_code=round(words(prose) / max(words(code), 1), 2), exported=len(ex),
                longest_export=max((len(_src(cells[i]).splitlines()) for i in ex), default=0),
                tested=sum(followed(i) for i in ex), longest_prose=max((len(_src(c).split()) for c in prose), default=0),
                outside=outside)

if __name__ == '__main__':
    paths = sys.argv[1:] or sorted(str(p) for p in Path('nbs').glob('*.ipynb'))
    print(f"{'notebook':24s} prose/code exported longest tested longest-prose outside")
    for p in paths:
        f = figures(p)
        print(f"{f['notebook']:24s} {f['prose_per_code']:10.2f} {f['exported']:8d} {f['longest_export']:7d} "
              f"{f['tested']:3d}/{f['exported']:<3d} {f['longest_prose']:13d} {' '.join(f['outside']) or '-'}")
