"""Build the documentation site into `docs/` from the notebooks in `nbs/`, offline, with MkDocs Material.

    python scripts/docs.py            # execute every notebook, render it with its outputs, write the API reference
    python scripts/docs.py --serve    # the same, then serve docs/ on http://127.0.0.1:8001/ until Ctrl-C
    python scripts/docs.py --no-exec  # render the notebooks with the outputs they have stored (fast)

nbdev's own site needs Quarto (`nbdev-docs`, which still works from the same notebooks where Quarto is installed).
This script does what nbdev's processing does for Quarto with tools that install from PyPI:

- each notebook is executed in a scratch folder (nbclient); cells flagged `#| eval: false` or with one of the
  `tst_flags` (`notest`, `slow`, `cuda`) are shown but not run;
- exported cells are replaced by their documentation (signature, docstring, a table of the parameters and their
  docments), `#| hide` cells are dropped and the remaining `#|` directives are stripped, as nbdev does;
- `api.md` documents every public symbol of `fastexplorer.all` and every method fastexplorer patches onto fastai
  or PyTorch classes;
- MkDocs (Material theme, mkdocs-jupyter) renders it all into static pages that need no network.
"""
from __future__ import annotations
import argparse, copy, functools, http.server, importlib, inspect, os, re, shutil, sys, tempfile, warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS, SRC, SITE = ROOT/'nbs', ROOT/'_docs_src', ROOT/'docs'
FLAGS = ('notest', 'slow', 'cuda')            # the `tst_flags` of pyproject.toml: nbdev-test skips these cells
_dir_re = re.compile(r'^\s*#\|\s*([\w-]+)(?::?\s*(.*))?$')

def directives(src:str)->dict:
    "The `#|` directives at the top of a cell's source, as {name: value}"
    res = {}
    for line in src.splitlines():
        if not line.strip(): continue
        m = _dir_re.match(line)
        if not m: break
        res[m.group(1)] = (m.group(2) or '').strip()
    return res

def strip_directives(src:str)->str:
    lines = src.splitlines()
    while lines and (not lines[0].strip() or _dir_re.match(lines[0])): lines.pop(0)
    return '\n'.join(lines)

# ---- API documentation: one markdown block per symbol ------------------------------------------------------------
def _code(s:str)->str:
    "An HTML code span safe in a markdown table cell (a `|` in a type such as `dict | None` would split the cell)"
    import html
    return '<code>' + html.escape(s).replace('|', '&#124;') + '</code>'

def _cell(s:str)->str:
    "Markdown for a table cell: code spans as HTML, other pipes escaped, on one line"
    parts = re.split(r'(`[^`]*`)', s.replace('\n', ' '))
    return ''.join(_code(p[1:-1]) if p.startswith('`') and p.endswith('`') and len(p) > 1 else p.replace('|', '\\|')
                   for p in parts)

def _anno(a)->str:
    if a is inspect.Parameter.empty: return ''
    return a if isinstance(a, str) else inspect.formatannotation(a)

def _fmt_default(v)->str: return '' if v is inspect.Parameter.empty else repr(v)

def _param(p:inspect.Parameter)->str:
    star = {p.VAR_POSITIONAL: '*', p.VAR_KEYWORD: '**'}.get(p.kind, '')
    s = star + p.name + (f':{_anno(p.annotation)}' if p.annotation is not p.empty else '')
    return s + (f'={_fmt_default(p.default)}' if p.default is not p.empty else '')

def signature(name:str, sig:inspect.Signature)->str:
    "`name(a:int=1, ...)->T` as in the source (string annotations unquoted), one parameter per line when long"
    ps, prev = [], None
    for p in sig.parameters.values():
        if p.name in ('self', 'cls'): continue
        if p.kind == p.KEYWORD_ONLY and prev not in (p.KEYWORD_ONLY, p.VAR_POSITIONAL): ps.append('*')
        if prev == p.POSITIONAL_ONLY and p.kind != p.POSITIONAL_ONLY: ps.append('/')
        ps.append(_param(p)); prev = p.kind
    ret = '' if sig.return_annotation is sig.empty else f'->{_anno(sig.return_annotation)}'
    one = f"{name}({', '.join(ps)}){ret}"
    if len(one) <= 90: return one
    return f"{name}(\n" + ''.join(f"    {p},\n" for p in ps) + f"){ret}"

def _target(obj):
    return obj.__init__ if inspect.isclass(obj) and '__init__' in vars(obj) else obj

def doc_markdown(name:str, obj, level:int=3)->str:
    "Markdown for one public symbol: heading, signature, docstring and a table of parameters with their docments"
    from fastcore.docments import docments
    out = [f"{'#'*level} {name}", '']
    f = _target(obj)
    if callable(obj):
        try: sig = inspect.signature(obj)
        except (TypeError, ValueError): sig = None
        if sig is not None: out += ['```python', signature(name, sig), '```', '']
        doc = inspect.getdoc(obj) or inspect.getdoc(f) or ''
        if doc: out += [doc, '']
        if sig is not None:
            try: dm = docments(f, full=True)
            except Exception: dm = {}
            rows = [(k, v) for k, v in dm.items() if k not in ('self', 'return')]
            if rows:
                out += ['| parameter | type | default | description |', '|---|---|---|---|']
                for k, v in rows:
                    out.append(f"| {_code(k)} | {_code(_anno(v.get('anno', inspect.Parameter.empty))) if v.get('anno', inspect.Parameter.empty) is not inspect.Parameter.empty else ''} | "
                               f"{_code(_fmt_default(v['default'])) if v.get('default', inspect.Parameter.empty) is not inspect.Parameter.empty else ''} | "
                               f"{_cell(v.get('docment') or '')} |")
                out.append('')
            ret = dm.get('return') if isinstance(dm, dict) else None
            if ret and ret.get('docment'): out += [f"**Returns:** {ret['docment']}", '']
    else:
        val = (f"({', '.join(o.__name__ for o in obj)})" if isinstance(obj, tuple) and all(inspect.isclass(o) for o in obj)
               else repr(obj))
        out += ['```python', f'{name} = {val}', '```', '']
        doc = _constant_docs().get(name)
        if doc: out += [doc, '']
    return '\n'.join(out)

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
    res, seen = [], set()
    for n in sorted(n for n in dir(fa) if not n.startswith('_')):
        o = getattr(fa, n)
        if inspect.ismodule(o): continue
        mod = getattr(o, '__module__', None) or _module_of(n)
        if not str(mod).startswith('fastexplorer'): continue
        res.append((mod, n, o)); seen.add(n)
    for mod, syms in _modidx.d['syms'].items():
        m = importlib.import_module(mod)
        for full in syms:
            nm = full[len(mod)+1:]
            parts = nm.split('.')
            if len(parts) < 2 or any(p.startswith('_') for p in parts): continue
            try: o = functools.reduce(getattr, parts[1:], _resolve(m, parts[0]))
            except AttributeError: continue
            res.append((mod, nm, o))
    order = list(_modules())
    return sorted(res, key=lambda r: (order.index(r[0]) if r[0] in order else len(order), _line(*r)))

def _line(mod:str, name:str, obj)->int:
    "Where `name` is defined in its module, to list symbols in the order the notebook explains them"
    try: return inspect.getsourcelines(inspect.unwrap(obj))[1]
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

def _default_exp(cells)->str|None:
    "The module a notebook exports to (its `#| default_exp`), if any"
    return next((directives(c.source)['default_exp'] for c in cells
                 if c.cell_type == 'code' and 'default_exp' in directives(c.source)), None)

@functools.cache
def _outline()->dict:
    "{notebook file name: (title, default_exp)}, each notebook read once"
    import nbformat
    res = {}
    for nb in _notebooks():
        cells = nbformat.read(nb, as_version=4).cells
        res[nb.name] = (_title(cells, nb.stem), _default_exp(cells))
    return res

def _modules()->dict:
    "{module name: (page file, title)} from each notebook's `default_exp`"
    return {f'fastexplorer.{exp}': (name, title) for name, (title, exp) in _outline().items() if exp}

def _title(cells, default:str)->str:
    for c in cells:
        if c.cell_type == 'markdown':
            m = re.search(r'^#\s+(.+)$', c.source, re.M)
            if m: return m.group(1).strip()
    return default

# ---- Notebooks ---------------------------------------------------------------------------------------------------
def _notebooks()->list:
    return sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith(('_', '.')))

def _def_names(src:str)->list:
    "Public names an exported cell defines, as nbdev's `show_doc` would name them (`Learner.fit` for a patch)"
    import ast
    try: tree = ast.parse(src)
    except SyntaxError: return []
    res = []
    for o in tree.body:
        if not isinstance(o, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or o.name.startswith('_'): continue
        patched = any((isinstance(d, ast.Name) and d.id == 'patch') or
                      (isinstance(d, ast.Call) and getattr(d.func, 'id', '') == 'patch') for d in o.decorator_list)
        if patched and o.args.args and o.args.args[0].annotation is not None:
            res.append(f"{ast.unparse(o.args.args[0].annotation)}.{o.name}")
        elif not patched: res.append(o.name)
    return res

def _doc_cells(names:list, module)->list:
    import nbformat
    res = []
    for nm in names:
        try: o = functools.reduce(getattr, nm.split('.')[1:], _resolve(module, nm.split('.')[0]))
        except AttributeError: continue
        res.append(nbformat.v4.new_markdown_cell(doc_markdown(nm, o, level=4)))
    return res

_link_re = re.compile(r'\]\((?!https?:|#|mailto:)([^)\s]+?)\.ipynb(#[^)]*)?\)')

def render_notebook(src:Path, dst:Path, execute:bool=True, timeout:int=600):
    "Execute `src` (unless told not to) in a scratch folder, then write the page version of it to `dst`"
    import nbformat
    nb = nbformat.read(src, as_version=4)
    for c in nb.cells:
        if c.cell_type != 'code': continue
        d = directives(c.source)
        if d.get('eval', '').lower() == 'false' or d.keys() & set(FLAGS) or 'nbdev_export()' in c.source:
            c.metadata.setdefault('tags', []).append('skip-execution')
    if execute:
        from nbclient import NotebookClient
        from jupyter_client.manager import KernelManager
        for c in nb.cells:
            if c.cell_type == 'code': c.outputs, c.execution_count = [], None
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(NBS/'images', Path(tmp)/'images', dirs_exist_ok=True)
            # a local socket, not TCP: nothing to eavesdrop on, and no kernel warning about unencrypted TCP per notebook
            km = KernelManager(kernel_name='python3', transport='ipc', ip=str(Path(tmp)/'kernel'))
            try: NotebookClient(nb, km=km, timeout=timeout, resources={'metadata': {'path': tmp}},
                                skip_cells_with_tag='skip-execution').execute()
            finally:
                if km.has_kernel: km.shutdown_kernel()
    exp = _default_exp(nb.cells)
    module = importlib.import_module(f'fastexplorer.{exp}') if exp else None
    cells = []
    for c in nb.cells:
        if c.cell_type == 'markdown':
            c.source = _link_re.sub(lambda m: f"]({m.group(1)}.html{m.group(2) or ''})", c.source)
            cells.append(c); continue
        if c.cell_type != 'code': continue
        d = directives(c.source)
        if d.keys() & {'export', 'exports'} and module is not None:
            cells += _doc_cells(_def_names(c.source), module)
            if 'exports' in d: cells.append(_code_cell(c))
            continue
        if d.keys() & {'exporti', 'hide', 'default_exp'} or d.get('include', '') == 'false': continue
        cells.append(_code_cell(c))
    out = nbformat.v4.new_notebook(cells=cells, metadata={'kernelspec': nb.metadata.get('kernelspec', {}),
                                                          'language_info': {'name': 'python'}})
    for c in out.cells: c.pop('id', None)
    nbformat.write(out, dst, version=4)

def _code_cell(c):
    "A clean copy of a code cell: directives stripped, only the keys nbformat accepts (nbdev adds others)"
    import nbformat
    n = nbformat.v4.new_code_cell(strip_directives(c.source))
    n.outputs = [o for o in c.get('outputs', []) if not (o.get('output_type') == 'stream' and o.get('name') == 'stderr')]
    n.execution_count = c.get('execution_count')
    return n

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
    warnings.filterwarnings('ignore')
    os.environ['IN_TEST'] = '1'    # as under nbdev-test: notebooks skip what only makes sense interactively
    if SRC.exists(): shutil.rmtree(SRC)
    SRC.mkdir()
    shutil.copytree(NBS/'images', SRC/'images')
    nbs = _notebooks()
    with ThreadPoolExecutor(max(1, workers)) as ex:
        list(ex.map(lambda nb: render_notebook(nb, SRC/nb.name, execute=execute), nbs))
    (SRC/'api.md').write_text(api_page())
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
