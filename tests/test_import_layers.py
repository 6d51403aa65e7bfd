"""The house has no circles: no two modules of ``mindrl``, ``algorithms`` and ``rewards`` import
each other, directly or round a longer loop. Every import counts, including the lazy ones inside
functions (a lazy import hides a circle from Python, not from a reader). Reads the source with
``ast``; imports nothing of the project."""

import ast
from pathlib import Path
from typing import Dict, List, Set

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("mindrl", "algorithms", "rewards")


def module_files() -> Dict[str, Path]:
    """Dotted module name -> source file, for every module of the checked packages."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: Path, known: Set[str]) -> Set[str]:
    """The project modules that ``name`` (at ``path``) imports anywhere in its body. ``from X
    import y`` counts as an import of ``X.y`` when that is a module, else of ``X``."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                here = here[:len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            # `import a.b.c` of a name that is not itself a module: the nearest module above it.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph() -> Dict[str, Set[str]]:
    files = module_files()
    known = set(files)
    return {name: imported_modules(name, path, known) for name, path in files.items()}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """One loop (``a -> b -> ... -> a``) for each strongly connected group of more than one
    module (Tarjan's algorithm, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    groups: List[List[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return [loop_through(graph, set(g), g[0]) for g in groups]


def loop_through(graph: Dict[str, Set[str]], group: Set[str], start: str) -> List[str]:
    """A shortest path from ``start`` back to itself inside ``group`` (breadth first)."""
    parent = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    path = [node]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, node, start]
                if child not in parent:
                    parent[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"no loop through {start}")


def test_cycle_finder_on_a_hand_built_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]


def test_import_parser_counts_lazy_relative_and_submodule_imports(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n    from p.c import thing\n")
    known = {"p", "p.a", "p.b", "p.c"}
    assert imported_modules("p.a", pkg / "a.py", known) == {"p.b", "p.c"}


def test_the_graph_sees_the_whole_house():
    graph = import_graph()
    assert "mindrl.cli" in graph and "algorithms.advantages" in graph
    assert "mindrl.config.schema" in graph["mindrl.config.loader"]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in found)


def test_lower_rooms_do_not_import_upper_ones():
    """Config knows no backend, and launching a run does not reach into the model zoo."""
    graph = import_graph()
    climbs = [(a, b) for a, targets in graph.items() for b in targets
              if (a.startswith("mindrl.config") and b.startswith("mindrl.backends"))
              or (a.startswith("mindrl.distributed") and b.startswith("mindrl.models"))]
    assert not climbs, climbs


def test_rooms_form_no_cycle():
    """One floor above another: the rooms (``mindrl.<room>``, ``algorithms``, ``rewards``)
    import each other one way only, so the house reads bottom-up."""
    graph = import_graph()

    def room(module: str) -> str:
        parts = module.split(".")
        return parts[1] if parts[0] == "mindrl" and len(parts) > 1 else parts[0]

    rooms: Dict[str, Set[str]] = {}
    for a, targets in graph.items():
        rooms.setdefault(room(a), set()).update(room(b) for b in targets if room(b) != room(a))
    found = cycles(rooms)
    assert not found, "rooms in a circle:\n" + "\n".join("  " + " -> ".join(c) for c in found)
