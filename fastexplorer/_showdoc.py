"""The renderer nbdev's `show_doc` uses for fastexplorer (`renderer` in `[tool.nbdev]`): fastcore's `MarkdownRenderer`
with a heading, the signature as it is called and a table of the parameters with their docments.

Hand-written, like `all.py`: nbdev imports it by name wherever `show_doc` runs (Jupyter, `nbdev-docs`,
`scripts/docs.py`), so it lives in the package."""
from __future__ import annotations
import functools, html, inspect, re
from fastcore.docments import MarkdownRenderer, DocmentText, docments, empty, qual_name

__all__ = ['TableRenderer']

def _anno(a)->str: return a if isinstance(a, str) else inspect.formatannotation(a)

def _code(s:str)->str:
    "A code span as HTML: Python-Markdown (`api.md`) and mistune (notebook pages) disagree on `|` in a backticked table cell"
    return '<code>' + html.escape(s).replace('|', '&#124;') + '</code>'

def _cell(s:str)->str:
    "Markdown for a table cell: code spans as HTML, other pipes escaped, on one line"
    return re.sub(r'`([^`]+)`|\|', lambda m: _code(m[1]) if m[1] else r'\|', s.replace('\n', ' '))

class TableRenderer(MarkdownRenderer):
    "fastcore's `MarkdownRenderer` with a heading, the signature as it is called and a table of the parameters' docments"
    def __init__(self, sym, name:str|None=None, title_level:int=3, maxline:int=90):
        # fastcore unwraps a `property` to its getter, but not a `functools.cached_property`
        self.prop = isinstance(sym, (property, functools.cached_property))
        if isinstance(sym, functools.cached_property): sym = sym.func
        # named before fastcore unwraps it: `@patch` names a decorated function (a context manager), not the one it wraps
        super().__init__(sym, name=name or qual_name(sym), title_level=title_level, maxline=maxline)
        if self.sig is None or not isinstance(self.dm, DocmentText): return    # no signature: an exception class, say
        # The docments again with `args_kwargs`: without it a `**kwargs` comment is read as the return's. And the types
        # as written: docments gives an unannotated parameter its default's type (`layers:NoneType=None`).
        sig, dm = inspect.signature(self.sym), docments(self.sym, full=True, args_kwargs=True)
        for k,v in dm.items():
            if k == 'return' or k in sig.parameters: v.anno = sig.return_annotation if k == 'return' else sig.parameters[k].annotation
        self.dm.dm = {k:v for k,v in dm.items() if k not in ('self', 'cls')}

    def signature(self)->str:
        "`Class.method(a:int=1, *, b=None)->T` as it is called, under the documented name, one parameter a line when long"
        # fastcore's shows `def`, also for a class, a patched method's bare name and each docment as a comment
        ret = self.dm.dm.get('return', {}).get('anno', empty)
        ret = '' if ret is empty else _anno(ret)
        if self.prop: return self.nm + (f': {ret}' if ret else '')
        ps = [p for p,_ in self.dm.params]
        one = f"{self.nm}({', '.join(ps)})" + (f'->{ret}' if ret else '')
        if len(one) <= self.maxline: return one
        return f"{self.nm}(\n" + ''.join(f"    {p},\n" for p in ps) + ')' + (f'->{ret}' if ret else '')

    def table(self)->str:
        "The parameters, their types, defaults and docments as a table, if any is documented (as fastcore's `DocmentTbl`)"
        # `DocmentTbl` shows defaults with `str` (`runs/run`) and escapes a `|` inside a code span, which then shows
        ps = {k:v for k,v in self.dm.dm.items() if k != 'return'}
        if not any(v.docment for v in ps.values()): return ''
        star = {inspect.Parameter.VAR_POSITIONAL: '*', inspect.Parameter.VAR_KEYWORD: '**'}
        rows = [f"| {_code(star.get(v.kind, '') + k)} | {'' if v.anno is empty else _code(_anno(v.anno))} | "
                f"{'' if v.default is empty else _code(repr(v.default))} | {_cell(v.docment or '')} |"
                for k,v in ps.items()]
        return '\n'.join(['| parameter | type | default | description |', '|---|---|---|---|', *rows])

    def _repr_markdown_(self):
        "Heading, signature, docstring, parameters and what is returned (fastcore's: no heading, an italic docstring)"
        ok = self.sig is not None and isinstance(self.dm, DocmentText)
        ret = ok and not self.prop and self.dm.dm.get('return', {}).get('docment')
        # the name's underscores escaped: `Node.__iter__` would show as "Node.**iter**"
        parts = ['#'*self.title_level + ' ' + self.nm.replace('_', r'\_'), ok and f"```python\n{self.signature()}\n```",
                 self.docs, ok and self.table(), ret and f"**Returns:** {ret}"]
        return '\n\n'.join(p for p in parts if p) + '\n'
