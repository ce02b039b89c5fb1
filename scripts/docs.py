"""Build the documentation site into `docs/` from the notebooks in `nbs/`, offline, with MkDocs Material.

    python scripts/docs.py            # execute every notebook, render it with its outputs, write the API reference
    python scripts/docs.py --serve    # the same, then serve docs/ on http://127.0.0.1:8001/ until Ctrl-C
    python scripts/docs.py --no-exec  # render the notebooks with the outputs they have stored (fast)

nbdev's own site needs Quarto (`nbdev-docs`, which still works from the same notebooks where Quarto is installed).
This script glues nbdev's processing to MkDocs, which installs from PyPI:

- each notebook is executed in a Jupyter kernel, in a scratch folder: the cells `nbdev-test` runs (nbdev's
  `nb_test_cells`: not `#| eval: false` cells, nor those with one of the `tst_flags` of pyproject.toml);
- nbdev's doc processors (`FilterDefaults`, less the few that write for Quarto only) add a `show_doc` after each
  exported definition and run it, drop exported and `#| hide` cells and strip the `#|` directives; `show_doc` renders
  with the `renderer` set in pyproject.toml (`fastexplorer.showdoc.TableRenderer`: signature, docstring, a table of
  the parameters and their docments);
- `api.md` runs `show_doc` on every public symbol of `fastexplorer.all` and every method fastexplorer patches onto
  fastai or PyTorch classes (nbdev has no such page);
- MkDocs (Material theme, mkdocs-jupyter) renders it all into static pages that need no network.
"""
from __future__ import annotations
import argparse, functools, http.server, importlib, inspect, os, re, shutil, sys, tempfile, warnings
from itertools import groupby
from pathlib import Path
from fastcore.nbio import read_nb, write_nb, mk_cell, nb_frontmatter
from fastcore.xtras import working_directory
from nbdev.config import get_config
from nbdev.process import NBProcessor, Processor
from nbdev.processors import FilterDefaults, FrontmatterProc, insert_warning, add_show_docs, add_links, add_fold

ROOT = Path(__file__).resolve().parents[1]
NBS, SRC, SITE = ROOT/'nbs', ROOT/'_docs_src', ROOT/'docs'

# ---- Notebooks: nbdev's processing, then what MkDocs needs -------------------------------------------------------
class _show_docs_in_order(Processor):
    "After `add_show_docs`, which inserts a cell's last definition's `show_doc` first: source order, headings under `###`"
    def begin(self):
        sd = lambda c: getattr(c, 'has_sd', False)
        self.nb.cells = [c for k, g in groupby(self.nb.cells, sd) for c in (list(g)[::-1] if k else g)]
        for c in filter(sd, self.nb.cells): c.source = c.source[:-1] + ', title_level=4)'

class DocsFilter(FilterDefaults):
    "nbdev's doc processors, less those that write for Quarto only: frontmatter, a warning, links to the hosted docs, code folding"
    def base_procs(self):
        res = [p for p in super().base_procs() if p not in (FrontmatterProc, insert_warning, add_links, add_fold)]
        i = res.index(add_show_docs) + 1
        return res[:i] + [_show_docs_in_order] + res[i:]

    def nb_proc(self, nb):
        "Directives removed, not turned into Quarto's cell options, which MkDocs would show as code"
        return NBProcessor(nb=nb, procs=self.procs(), rm_directives=True)

_link_re = re.compile(r'\]\((?!https?:|#|mailto:)([^)\s]+?)\.ipynb(#[^)]*)?\)')

def _page_cell(c):
    "A processed cell as MkDocs should show it (None: not at all), doing what Quarto does with the cell options nbdev sets"
    if c.cell_type == 'markdown': c.source = _link_re.sub(lambda m: f"]({m.group(1)}.html{m.group(2) or ''})", c.source)
    if c.cell_type != 'code': return c
    if c.directives.get('output') == 'asis':    # a `show_doc` cell, as nbdev's `clean_show_doc` marks it: its markdown only
        return mk_cell(''.join(''.join(o.data['text/markdown']) for o in c.outputs if 'text/markdown' in o.get('data', {})),
                       'markdown')
    if c.directives_.get('include') == 'false': return None
    c.outputs = [o for o in c.outputs if o.get('name') != 'stderr']    # warnings are no part of the lesson
    c.metadata.pop('execution', None)    # timings `exec_show_docs` leaves, in seconds where nbformat wants ISO strings
    return c

def execute_notebook(src:Path, dst:Path, timeout:int=600):
    "Run the cells of `src` that `nbdev-test` runs in a Jupyter kernel, in a scratch folder; write it with its outputs to `dst`"
    # A kernel, not `nbdev-test`'s own shell (execnb): there fastprogress prints console bars instead of its HTML tables
    import nbformat
    from nbclient import NotebookClient
    from jupyter_client.manager import KernelManager
    from nbdev.test import nb_test_cells
    run = {c.idx_ for c in nb_test_cells(src, skip_flags=get_config(ROOT).tst_flags.split())}
    nb = nbformat.read(src, as_version=4)
    for i, c in enumerate(nb.cells):
        if c.cell_type != 'code': continue
        c.outputs, c.execution_count = [], None
        if i not in run: c.metadata.setdefault('tags', []).append('skip-execution')
    with tempfile.TemporaryDirectory() as tmp:    # what a notebook writes lands here, not in nbs/
        shutil.copytree(NBS/'images', Path(tmp)/'images')
        # a local socket, not TCP: nothing to eavesdrop on, and no kernel warning about unencrypted TCP per notebook
        km = KernelManager(kernel_name='python3', transport='ipc', ip=str(Path(tmp)/'kernel'))
        try: NotebookClient(nb, km=km, timeout=timeout, resources={'metadata': {'path': tmp}},
                            skip_cells_with_tag='skip-execution').execute()
        finally:
            if km.has_kernel: km.shutdown_kernel()
    nbformat.write(nb, dst)

def render_notebook(src:Path, execute:bool=True):
    "Execute `src` (unless told not to), process it with `DocsFilter`, and write the page version of it to `_docs_src/`"
    os.environ['IN_TEST'] = '1'    # as under nbdev-test: notebooks skip what only makes sense interactively
    warnings.filterwarnings('ignore')
    if execute: execute_notebook(src, SRC/src.name)
    nb = read_nb(SRC/src.name if execute else src)
    main = sys.modules['__main__']    # the shell nbdev runs `show_doc` in makes itself `__main__`; the pool needs ours back
    try:
        with working_directory(NBS): DocsFilter()(nb)    # where nbdev finds its config, the `renderer` included
    finally: sys.modules['__main__'] = main
    nb.cells = [c for c in map(_page_cell, nb.cells) if c is not None]
    write_nb(nb, SRC/src.name)

def _notebooks()->list:
    return sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith(('_', '.')))

@functools.cache
def _outline()->dict:
    "{notebook file name: (title, default_exp)}, each notebook read once"
    res = {}
    for p in _notebooks():
        nb = read_nb(p)
        exp = next((c.directives['default_exp'] for c in nb.cells
                    if c.cell_type == 'code' and 'default_exp' in c.directives), None)
        res[p.name] = (nb_frontmatter(nb).get('title', p.stem), exp)
    return res

def _modules()->dict:
    "{module name: (page file, title)} from each notebook's `default_exp`"
    return {f'fastexplorer.{exp}': (name, title) for name, (title, exp) in _outline().items() if exp}

# ---- The API page: nbdev has none --------------------------------------------------------------------------------
def doc_markdown(name:str, obj)->str:
    "`show_doc`'s markdown for `obj`; for a constant, which it cannot document, the value and the comment defining it"
    if callable(obj) or isinstance(obj, (property, functools.cached_property)):
        from nbdev.showdoc import show_doc
        return show_doc(obj, name=name)._repr_markdown_()
    val = (f"({', '.join(o.__name__ for o in obj)})" if isinstance(obj, tuple) and all(inspect.isclass(o) for o in obj)
           else repr(obj))
    doc = _constant_docs().get(name)
    return f"### {name}\n\n```python\n{name} = {val}\n```\n" + (f"\n{doc}\n" if doc else '')

@functools.cache
def _constant_docs()->dict:
    "Constants have no docstring: use the comment on the line that defines them in the library source"
    res = {}
    for py in (ROOT/'fastexplorer').glob('*.py'):
        lines = py.read_text().splitlines()
        for i, line in enumerate(lines):
            m = re.match(r'^([A-Z][A-Z0-9_]*)\s*=.*?#\s*(.+)$', line)
            if m: res[m.group(1)] = m.group(2).strip()
            elif ((m := re.match(r'^([A-Z][A-Z0-9_]*)\s*=', line)) and i and lines[i-1].startswith('#')
                  and not lines[i-1].startswith('# %%')):
                res[m.group(1)] = lines[i-1].lstrip('# ').strip()
    return res

def public_api()->list:
    "(module, name, object) for every public symbol of `fastexplorer.all` and every public patched method"
    import fastexplorer.all as fa
    from fastexplorer import _modidx
    res = []
    for n in sorted(n for n in dir(fa) if not n.startswith('_')):
        o = getattr(fa, n)
        if inspect.ismodule(o): continue
        mod = getattr(o, '__module__', None) or _module_of(n)
        if str(mod).startswith('fastexplorer'): res.append((mod, n, o))
    for mod, syms in _modidx.d['syms'].items():
        m = importlib.import_module(mod)
        for full in syms:
            parts = full[len(mod)+1:].split('.')
            if len(parts) < 2 or any(p.startswith('_') for p in parts): continue
            try: o = functools.reduce(getattr, parts[1:], _resolve(m, parts[0]))
            except AttributeError: continue
            res.append((mod, '.'.join(parts), o))
    order = list(_modules())
    return sorted(res, key=lambda r: (order.index(r[0]) if r[0] in order else len(order), _line(*r)))

def _line(mod:str, name:str, obj)->int:
    "Where `name` is defined in its module, to list symbols in the order the notebook explains them"
    f = obj.fget if isinstance(obj, property) else obj.func if isinstance(obj, functools.cached_property) else obj
    try: return inspect.getsourcelines(inspect.unwrap(f))[1]
    except (TypeError, OSError):
        src = Path(importlib.import_module(mod).__file__).read_text().splitlines()
        return next((i for i, l in enumerate(src) if re.match(rf'^{re.escape(name)}\s*=', l)), 10**6)

def _module_of(name:str):
    from fastexplorer import _modidx
    for mod, syms in _modidx.d['syms'].items():
        if f'{mod}.{name}' in syms: return mod
    for mod in _modidx.d['syms']:
        if name in vars(importlib.import_module(mod)).get('__all__', []): return mod

def _resolve(m, name:str):
    if name == 'nn': import torch.nn as nn; return nn
    return getattr(m, name)

def api_page()->str:
    out = ['# API reference', '',
           'Every public symbol of `fastexplorer.all` (`from fastexplorer.all import *`), and the methods fastexplorer '
           'adds to fastai and PyTorch classes, grouped by module. Each module is explained, with examples, on its '
           'own page.', '']
    cur = None
    for mod, name, o in public_api():
        if mod != cur:
            cur = mod
            page = _modules().get(mod)
            out += [f"## `{mod}`", '', f"Explained in [{page[1]}]({page[0]})." if page else '', '']
        out += [doc_markdown(name, o), '']
    return '\n'.join(out)

# ---- Site --------------------------------------------------------------------------------------------------------
def nav()->list:
    "Home, the guides (the tutorial, Hugging Face models), one page per module notebook (in number order), the API reference"
    pages = {name: title for name, (title, _) in _outline().items()}
    first = [n for n in ('index.ipynb', 'tutorial.ipynb', 'huggingface.ipynb') if n in pages]
    rest = [n for n in pages if n not in first]
    res = [{'Home' if n == 'index.ipynb' else pages[n]: n} for n in first]
    res.append({'Modules': [{pages[n]: n} for n in rest]})
    res.append({'API reference': 'api.md'})
    return res

def build(execute:bool=True, workers:int=2, site:Path=SITE):
    from fastcore.parallel import parallel
    warnings.filterwarnings('ignore')
    if SRC.exists(): shutil.rmtree(SRC)
    SRC.mkdir()
    shutil.copytree(NBS/'images', SRC/'images')
    nbs = _notebooks()
    parallel(render_notebook, nbs, execute=execute, n_workers=workers)
    with working_directory(NBS): (SRC/'api.md').write_text(api_page())
    from mkdocs.config import load_config
    from mkdocs.commands.build import build as mk_build
    cfg = load_config(str(ROOT/'mkdocs.yml'), nav=nav(), docs_dir=str(SRC), site_dir=str(site))
    mk_build(cfg)
    for page in site.glob('*.html'): _fix_page(page)
    print(f'docs: {len(nbs)} notebooks and the API reference built into {site}')

def _fix_page(page:Path):
    """Two mismatches between nbconvert's HTML and the table of contents MkDocs builds for it: nbconvert gives two
    headings with the same text the same id (MkDocs expects `x`, `x_1`) and slugs code in headings differently. Make
    heading ids unique and point the contents' links at them, in order. Also drop nbconvert's MathJax loader: it has no
    URL offline, and an empty `src` loads the page itself as a script (the notebooks hold no maths)."""
    from bs4 import BeautifulSoup
    html = page.read_text()
    if 'jp-Notebook' not in html: return
    soup = BeautifulSoup(html, 'html.parser')
    for s in soup.find_all('script', src=''): s.decompose()
    art = soup.select_one('article')
    heads = [h for h in art.find_all(['h1', 'h2', 'h3', 'h4', 'h5', 'h6']) if h.get('id')] if art else []
    seen = {}
    for h in heads:
        base = h['id']; n = seen.get(base, 0); seen[base] = n + 1
        if n:
            h['id'] = f'{base}_{n}'
            for a in h.find_all('a', href=f'#{base}'): a['href'] = f"#{h['id']}"
    for nav in soup.select('nav.md-nav--secondary'):
        links = nav.select('a[href^="#"]')
        for cand in ([h for h in heads if h.name != 'h1'], heads):
            if len(cand) == len(links):
                for a, h in zip(links, cand): a['href'] = f"#{h['id']}"
                break
    page.write_text(str(soup))

def serve(site:Path=SITE, port:int=8001):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    with http.server.ThreadingHTTPServer(('127.0.0.1', port), handler) as srv:
        print(f'serving the docs at http://127.0.0.1:{port}/ (Ctrl-C to stop)')
        try: srv.serve_forever()
        except KeyboardInterrupt: pass

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--serve', action='store_true', help='serve docs/ on 127.0.0.1 after building')
    p.add_argument('--port', type=int, default=8001, help='port for --serve')
    p.add_argument('--no-exec', action='store_true', help="don't execute notebooks; use their stored outputs")
    p.add_argument('--no-build', action='store_true', help='with --serve: serve what docs/ holds')
    p.add_argument('--workers', type=int, default=2, help='notebooks executed at once')
    a = p.parse_args(argv)
    if not (a.no_build and SITE.exists()): build(execute=not a.no_exec, workers=a.workers)
    if a.serve: serve(port=a.port)

if __name__ == '__main__': main()
