"""The import contract: three layers, and floors inside each (README, "Architecture").

core (pure ``testbed.`` modules) → engines (``simulators``, ``real_runs``) → application
(``testbed.app``). Inside the core and the application, packages stand on floors
(:data:`CORE_FLOORS`, :data:`APP_FLOORS`, named by package prefix): a module may import
its own floor and the floors below it, never one above. :func:`violations` reads every
Python file under a source root with :mod:`ast` (no import is executed) and returns
what breaks the contract:

* an import of a higher layer or a higher floor — anywhere in a file, functions and
  ``TYPE_CHECKING`` blocks included: a lazy import is still a dependency;
* a heavy third-party package in the wrong layer: SimPy, DL frameworks or MPI in the
  core (at any depth), a DL framework or MPI in ``simulators`` outside ``mpi_pool``,
  a DL framework at module level in ``real_runs``;
* an import circle between project modules (any import statement);
* a private name (``_x``) imported from another module;
* a project module that stands on no floor (every new package must be placed).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

CORE, ENGINE, APP = 0, 1, 2
LAYER_NAMES = {CORE: "core", ENGINE: "engines", APP: "application"}

#: The core's floors, bottom up. ``testbed`` alone is the package itself.
CORE_FLOORS: tuple[tuple[str, ...], ...] = (
    # foundation: quantities, errors, the I/O boundary, event logs, estimators, seeds
    ("testbed", "testbed.units", "testbed.errors", "testbed.io", "testbed.events",
     "testbed.stats", "testbed.streams"),
    # what is trained and what it runs on: the layer IR and zoo, system profiles
    ("testbed.model", "testbed.systems"),
    # the physics: cost model, failure/checkpoint math, precision transforms
    ("testbed.oracle", "testbed.resilience", "testbed.precision"),
    # what users write and what runs produce: scenarios (with their HPO section),
    # failure traces, measurement records, typed results
    ("testbed.scenario", "testbed.traces", "testbed.measurements", "testbed.outcomes"),
    # what is built on all of it: calibration fits, HPO planning and decisions
    ("testbed.calibration", "testbed.hpo"),
)
#: The engines: one floor (``simulators`` and ``real_runs`` do not import each other).
ENGINE_PACKAGES = ("simulators", "real_runs")
#: The application's floors, bottom up.
APP_FLOORS: tuple[tuple[str, ...], ...] = (
    ("testbed.app.progress", "testbed.app.results_db", "testbed.app.resolve"),
    ("testbed.app.sweep", "testbed.app.hpo"),
    ("testbed.app.report", "testbed.app.study"),
    ("testbed.app.cli", "testbed.app", "testbed.__main__"),
)
FRAMEWORKS = {"torch", "tensorflow", "keras", "chainer", "cupy", "jax"}
MPI = {"mpi4py"}
#: Optional heavy libraries that engines and the application import only lazily.
LAZY_ONLY = {"optuna", "matplotlib", "pyarrow"}
HEAVY_FOR_CORE = FRAMEWORKS | MPI | {"simpy", "optuna"}
#: Engine modules allowed to import MPI (lazily): the MPI pool for sweeps and HPO.
MPI_ENGINE_MODULES = ("simulators.mpi_pool",)


@dataclass(frozen=True)
class Import:
    module: str           # the importing module
    target: str           # the imported module (absolute)
    names: tuple[str, ...]
    line: int
    top_level: bool       # at module level (not inside a function or class body)


def _matches(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _floor_in(module: str, floors: tuple[tuple[str, ...], ...]) -> int | None:
    """The floor of ``module`` among ``floors`` (the longest matching prefix wins)."""
    best: tuple[int, int] | None = None
    for i, floor in enumerate(floors):
        for prefix in floor:
            exact_only = prefix in ("testbed", "testbed.app")
            hit = module == prefix if exact_only else _matches(module, (prefix,))
            if hit and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def rank_of(module: str) -> tuple[int, int] | None:
    """(layer, floor) of a project module, or None when it stands on no floor."""
    app = _floor_in(module, APP_FLOORS)
    if app is not None:
        return APP, app
    if _matches(module, ENGINE_PACKAGES):
        return ENGINE, 0
    core = _floor_in(module, CORE_FLOORS)
    if core is not None:
        return CORE, core
    return None


def layer_of(module: str) -> int | None:
    """The layer of a project module, or None when it belongs to none."""
    rank = rank_of(module)
    return None if rank is None else rank[0]


def floor_name(rank: tuple[int, int]) -> str:
    layer, floor = rank
    floors = {CORE: CORE_FLOORS, APP: APP_FLOORS}.get(layer)
    if floors is None:
        return LAYER_NAMES[layer]
    names = "/".join(p.split(".")[-1] for p in floors[floor] if p not in ("testbed",))
    return f"{LAYER_NAMES[layer]} floor {floor + 1} ({names})"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(root: Path, path: Path) -> list[Import]:
    """Every import statement of one file, with whether it is at module level."""
    module = module_name(root, path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = {id(n) for n in tree.body}
    nested_top: set[int] = set()
    for node in tree.body:      # imports inside module-level if/try blocks count as top level
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            nested_top |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        at_top = id(node) in top or id(node) in nested_top
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(Import(module, alias.name, (), node.lineno, at_top))
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                target = _resolve_relative(module, path.name == "__init__.py", node.level,
                                           node.module)
            out.append(Import(module, target, tuple(a.name for a in node.names), node.lineno,
                              at_top))
    return out


def _project_target(imp: Import, modules: set[str]) -> str | None:
    """The project module an import refers to (``from pkg import sub`` → ``pkg.sub``)."""
    if imp.target in modules:
        for name in imp.names:
            if f"{imp.target}.{name}" in modules:
                return f"{imp.target}.{name}"
        return imp.target
    parts = imp.target.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _heavy_problem(imp: Import, layer: int) -> str | None:
    top = imp.target.split(".")[0]
    if layer == CORE and top in HEAVY_FOR_CORE:
        return f"the core imports {top}"
    if imp.module.startswith("simulators") and top in FRAMEWORKS:
        return f"an engine of the simulator imports the framework {top}"
    if imp.module.startswith("simulators") and top in MPI and \
            not _matches(imp.module, MPI_ENGINE_MODULES):
        return "the simulator imports MPI outside simulators.mpi_pool"
    if imp.module.startswith("real_runs") and top in FRAMEWORKS | MPI and imp.top_level:
        return f"real_runs imports {top} at module level (import it inside functions)"
    if layer == APP and top in FRAMEWORKS | {"simpy"}:     # even inside a function:
        return f"the application imports {top} (frameworks live in real_runs)"
    if top in LAZY_ONLY and imp.top_level:
        return f"imports {top} at module level (import it where it is used)"
    return None


def violations(root: Path, packages: tuple[str, ...] = ("testbed", "simulators", "real_runs")
               ) -> list[str]:
    """Every break of the contract under ``root`` (empty when the tree keeps it)."""
    files = [p for pkg in packages if (root / pkg).is_dir() for p in sorted((root / pkg).rglob("*.py"))]
    modules = {module_name(root, p) for p in files}
    problems: list[str] = []
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in files:
        mod = module_name(root, path)
        layer = layer_of(mod)
        where = path.relative_to(root)
        if layer is None:
            problems.append(f"{where}: module {mod} belongs to no layer (add its package to a floor of the contract)")
            continue
        for imp in imports_of(root, path):
            heavy = _heavy_problem(imp, layer)
            if heavy:
                problems.append(f"{where}:{imp.line}: {heavy}")
            target = _project_target(imp, modules)
            if target is None or target == mod:
                continue
            graph[mod].add(target)
            rank, trank = rank_of(mod), rank_of(target)
            if rank is not None and trank is not None and trank > rank:
                what = (f"{LAYER_NAMES[layer]} module {mod} imports "
                        f"{LAYER_NAMES[trank[0]]} module {target}")
                if trank[0] == rank[0]:
                    what = (f"{floor_name(rank)} module {mod} imports {target} of the higher "
                            f"{floor_name(trank)}")
                problems.append(f"{where}:{imp.line}: {what}")
            private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            if private:
                problems.append(f"{where}:{imp.line}: imports private name(s) "
                                f"{', '.join(private)} from {target}")
    for comp in _cycles(graph):
        problems.append("import circle: " + " ↔ ".join(comp))
    return problems
