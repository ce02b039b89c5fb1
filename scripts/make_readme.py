"""Write README.md from nbs/index.ipynb: markdown cells as they are, code cells and their text outputs fenced.

`nbdev-readme` does this with Quarto, which cannot be installed everywhere; this keeps the README in sync without it.
Cells marked `#| hide` are left out; image links relative to nbs/ are rewritten for the repository root. Usage: python scripts/make_readme.py [--check]
"""
import json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent

def _text(o): return ''.join(o) if isinstance(o, list) else o

def _terminal(txt:str)->str:
    "Stream text as a terminal leaves it: each line's last carriage-return segment, without fastprogress's bar prefixes"
    lines = []
    for line in txt.split('\n'):
        seg = line.split('\r')[-1] if line.rstrip('\r') else ''
        seg = re.sub(r'^█*(Epoch \d+/\d+ :\s*)?', '', seg.rstrip('\r')).rstrip()
        if seg.strip() and not re.fullmatch(r'\s*\|[█-]+\| [\d.]+% \[.*\]', seg): lines.append(seg)
    return '\n'.join(lines)

def render(nb:dict)->str:
    out = []
    for c in nb['cells']:
        src = _text(c['source']).rstrip()
        if not src or src.startswith('#| hide'): continue
        if c['cell_type'] == 'markdown':   # links relative to nbs/ become relative to the repository root
            out.append(re.sub(r'\]\((?!https?:|#|/)([^)\s]+\.ipynb|images/)', r'](nbs/\1', src)); continue
        out.append(f"```python\n{src}\n```")
        for o in c.get('outputs', []):
            if o.get('name') == 'stderr': continue   # warnings of the libraries imported, as the docs site leaves them out
            txt = _text(o.get('text') or o.get('data', {}).get('text/plain', '')).rstrip()
            if o.get('output_type') == 'stream': txt = _terminal(txt)
            if txt: out.append(f"```\n{txt}\n```")
    return '\n\n'.join(out) + '\n'

def main():
    nb = json.loads((root/'nbs'/'index.ipynb').read_text())
    txt = render(nb)
    readme = root/'README.md'
    if '--check' in sys.argv:
        if not readme.exists() or readme.read_text() != txt: sys.exit("README.md is not in sync with nbs/index.ipynb: run python scripts/make_readme.py")
    else: readme.write_text(txt)

if __name__ == '__main__': main()
