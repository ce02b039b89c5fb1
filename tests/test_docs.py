"""The documentation site in a real browser: every page reachable from the home page loads without errors, every
internal link and anchor resolves, every image loads, and every public symbol of `fastexplorer.all` is documented in
the API reference with its docstring.

The site is what `python scripts/docs.py` builds into `docs/` (scripts/test.sh builds it before pytest); when `docs/`
is missing or older than a notebook, the fixture builds it first, one pytest-xdist worker at a time."""
import fcntl, functools, http.server, inspect, os, re, subprocess, sys, tempfile, threading
from pathlib import Path
from urllib.parse import urljoin, urldefrag, urlparse
import pytest
import fastexplorer.all as fa

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT/'docs'
CHROMIUM = '/usr/bin/chromium'
ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run']

if not os.path.exists(CHROMIUM):
    if os.environ.get('CI'): raise RuntimeError(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
    pytest.skip(f"{CHROMIUM} is not installed (scripts/test.sh installs it)", allow_module_level=True)

def _stale()->bool:
    idx = SITE/'index.html'
    if not idx.exists(): return True
    srcs = list((ROOT/'nbs').glob('*.ipynb')) + list((ROOT/'fastexplorer').glob('*.py')) + [ROOT/'scripts'/'docs.py', ROOT/'pyproject.toml']
    return max(p.stat().st_mtime for p in srcs) > idx.stat().st_mtime

@pytest.fixture(scope='module')
def site():
    "The built site served over http on a free port (the search and the notebooks' pages expect http, not file://)"
    with open(Path(tempfile.gettempdir())/f'fastexplorer-docs-{os.getuid()}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # another worker building the site: wait, then find it fresh
        if _stale(): subprocess.run([sys.executable, str(ROOT/'scripts'/'docs.py')], check=True, cwd=ROOT)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a): pass
    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):   # a browser that drops a connection it no longer needs is no error
            if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)): super().handle_error(request, client_address)
    srv = Server(('127.0.0.1', 0), functools.partial(Quiet, directory=str(SITE)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{srv.server_address[1]}/'
    srv.shutdown(); srv.server_close()

@pytest.fixture(scope='module')
def crawl(site):
    "Open the home page and every internal page reachable from it; record what each page links to and what failed"
    from playwright.sync_api import sync_playwright
    pages, problems, links = {}, [], []
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        todo, seen = [site], {site}
        while todo:
            url = todo.pop(0)
            p = b.new_page()
            p.on('console', lambda m, url=url: problems.append(f"{url}: console {m.type}: {m.text}") if m.type == 'error' else None)
            p.on('pageerror', lambda e, url=url: problems.append(f"{url}: pageerror {e}"))
            p.on('requestfailed', lambda r, url=url: problems.append(f"{url}: request failed {r.url}"))
            resp = p.goto(url, wait_until='load')
            if resp is None or resp.status != 200: problems.append(f"{url}: HTTP {resp and resp.status}")
            imgs = p.locator('img').evaluate_all("els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0])")
            problems += [f"{url}: image {src} did not load" for src,ok in imgs if not ok]
            ids = set(p.locator('[id]').evaluate_all("els => els.map(e => e.id)"))
            hrefs = p.locator('a[href]').evaluate_all("els => els.map(e => e.getAttribute('href'))")
            pages[url] = dict(text=p.locator('body').inner_text(), ids=ids, n_imgs=len(imgs),
                              n_plots=sum(1 for src,_ in imgs if (src or '').startswith('data:image/png')),
                              n_frames=p.locator('table.dataframe').count())
            for h in hrefs:
                full = urljoin(url, h)
                if urlparse(full).netloc != urlparse(site).netloc: continue
                target, frag = urldefrag(full)
                links.append((url, h, target, frag))
                if target not in seen and target.endswith(('.html', '/')):
                    seen.add(target); todo.append(target)
            p.close()
        b.close()
    return pages, problems, links

def test_every_page_loads_without_errors(crawl, site):
    pages, problems, _ = crawl
    assert not problems, '\n'.join(problems)
    names = {urlparse(u).path.rsplit('/', 1)[-1] or 'index.html' for u in pages}
    # the home page links the guides, every module notebook and the API reference
    expected = {'index.html', 'tutorial.html', 'huggingface.html', 'api.html'} | {p.stem + '.html' for p in (ROOT/'nbs').glob('[0-9]*.ipynb')}
    assert expected <= names, f"pages not reached from the home page: {sorted(expected - names)}"

def test_no_broken_internal_links(crawl):
    pages, _, links = crawl
    import urllib.request
    broken, status = [], {}
    for src, h, target, frag in links:
        if target not in status:
            try: status[target] = urllib.request.urlopen(target).status
            except Exception as e: status[target] = str(e)
        if status[target] != 200: broken.append(f"{src}: {h} -> {status[target]}")
        elif frag and target in pages and frag not in pages[target]['ids']: broken.append(f"{src}: {h}: no #{frag}")
    assert len(links) > 50
    assert not broken, '\n'.join(broken)

def test_home_page_is_the_readme_tour(crawl, site):
    pages, _, _ = crawl
    home = pages[site]
    for s in ('See inside a fastai model while it trains', 'Two commands', 'A short tour', 'The explorer'): assert s in home['text']
    assert home['n_imgs'] >= 1                                 # the explorer screenshot

def test_notebooks_rendered_with_outputs(crawl, site):
    "Executed outputs are on the pages: the tree's repr, DataFrames, plots (inline PNGs), screenshots"
    pages, _, _ = crawl
    home, tut, land = pages[site], pages[urljoin(site, 'tutorial.html')], pages[urljoin(site, '04_landscape.html')]
    assert 'Conv2d' in home['text'] and home['n_frames'] >= 2  # the tree's repr and the tour's DataFrames
    assert tut['n_plots'] >= 1 and tut['n_frames'] >= 1 and tut['n_imgs'] - tut['n_plots'] >= 2
    assert land['n_plots'] >= 1                               # the loss surface

def _plain(s:str)->str:
    "A docstring's markdown as the browser shows it: no backticks or emphasis, one space between words"
    return re.sub(r'\s+', ' ', re.sub(r'[`*]', '', s)).strip()

def test_api_reference_documents_every_public_symbol(crawl, site):
    pages, _, _ = crawl
    text = _plain(pages[urljoin(site, 'api.html')]['text'])
    names = [n for n in dir(fa) if not n.startswith('_') and not inspect.ismodule(getattr(fa, n))
             and (getattr(getattr(fa, n), '__module__', None) or 'fastexplorer').startswith('fastexplorer')]
    assert len(names) > 40
    missing = [n for n in names if not re.search(rf'(^|\s){re.escape(n)}(\s|$)', text)]
    assert not missing, f"not in the API reference: {missing}"
    no_doc = [n for n in names if callable(getattr(fa, n)) and (d := inspect.getdoc(getattr(fa, n)))
              and _plain(d.splitlines()[0]) not in text]
    assert not no_doc, f"docstring missing from the API reference: {no_doc}"
    undocumented = [n for n in names if callable(getattr(fa, n)) and not inspect.getdoc(getattr(fa, n))]
    assert not undocumented, f"public symbols without a docstring: {undocumented}"
    # the methods fastexplorer patches onto fastai and PyTorch classes are there too, with their parameter tables
    for m in ('Learner.to_representation', 'Learner.explore', 'Learner.loss_landscape', 'Module.to_representation'):
        assert m in text, m
    assert 'parameter type default description' in text.lower() or 'parameter\ttype' in text.lower()
    # and every public method and property of its classes, defined in the class body or attached with `@patch`, documented
    methods = _public_methods(names)
    assert len(methods) > 60 and 'ExplorerCallback.add_stat' in methods and 'RawRecorder.save' in methods
    missing = [m for m in methods if not re.search(rf'(^|\s){re.escape(m)}(\s|$)', text)]
    assert not missing, f"methods not in the API reference: {missing}"
    undocumented = [m for m,f in methods.items() if not inspect.getdoc(f)]
    assert not undocumented, f"public methods without a docstring: {undocumented}"
    no_doc = [m for m,f in methods.items() if _plain(inspect.getdoc(f).splitlines()[0]) not in text]
    assert not no_doc, f"method or property docstring missing from the API reference: {no_doc}"

def _public_methods(names:list)->dict:
    "`{'Class.method': function}` for the public methods and properties fastexplorer defines on the public classes of `names`"
    res = {}
    for n in names:
        if not inspect.isclass(o := getattr(fa, n)): continue
        for k,v in vars(o).items():
            f = v.fget if isinstance(v, property) else getattr(v, '__func__', v)   # a property, staticmethod or classmethod's function
            if not k.startswith('_') and inspect.isfunction(f) and (f.__module__ or '').startswith('fastexplorer'): res[f"{n}.{k}"] = f
    return res


def test_404_page_links_under_the_documented_subpath():
    "The 404 page, served for any path, links absolutely: under `site_url`'s subpath (/fastexplorer/), to pages that exist"
    html = (SITE/'404.html').read_text()
    links = [h for h in re.findall(r'href="(/[^"#]*)"', html)]
    assert links and all(h.startswith('/fastexplorer/') for h in links), links[:5]
    missing = [h for h in links if not (SITE/h.removeprefix('/fastexplorer/')).exists()]
    assert not missing, missing[:5]
