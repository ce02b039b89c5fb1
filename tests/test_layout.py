"The package's layout: rooms of a bounded size, imports that run one way, lines within 120 columns"
import ast
from pathlib import Path

PKG = Path(__file__).parent.parent/'fastexplorer'
MODULES = sorted(f for f in PKG.glob('*.py') if f.name not in ('_modidx.py',))


def _imports(f:Path)->set:
    "The package's modules that `f` imports, at its top or inside a function"
    got = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module: got.add(node.module.split('.')[0])
            elif node.level == 1: got.update(a.name for a in node.names)
            elif node.module and node.module.startswith('fastexplorer'):
                parts = node.module.split('.')
                got.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            got.update(a.name.split('.')[1] for a in node.names if a.name.startswith('fastexplorer.'))
    return {m for m in got if (PKG/f'{m}.py').exists()} - {f.stem}


def _cycle(graph:dict)->list|None:
    "A cycle of `graph` as a list of modules, or `None`"
    state,stack = {},[]
    def visit(m):
        state[m] = 1; stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1: return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)): return c
        state[m] = 2; stack.pop()
        return None
    for m in sorted(graph):
        if m not in state and (c := visit(m)): return c
    return None


def test_no_import_cycle():
    "No module imports, even inside a function, one that imports it back (`all.py`, the re-exports, aside)"
    graph = {f.stem: _imports(f) for f in MODULES if f.stem not in ('all', '__init__')}
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


def test_cycle_finder_finds_one():
    "The cycle finder is not blind"
    assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
    assert _cycle({'a': {'b'}, 'b': set()}) is None


def test_rooms_are_small():
    "No module over 450 lines, and the callback at most 300"
    sizes = {f.name: len(f.read_text().splitlines()) for f in MODULES}
    assert {k: v for k,v in sizes.items() if v > 450} == {}
    assert sizes['callback.py'] <= 300, sizes['callback.py']


def test_lines_within_120_columns():
    "At most 2% of the package's lines run past 120 columns"
    lines = [l for f in MODULES for l in f.read_text().splitlines()]
    long = [l for l in lines if len(l) > 120]
    assert len(long) <= 0.02 * len(lines), f"{len(long)} of {len(lines)} lines past 120 columns"
