"""The package's layers, as docs/design.md lists them: each imports only the layers its entry
names, all below it; the engine's parts likewise; an adapter reaches the internals only through
its kit; no two modules import each other.

Read from the source (no import needed), so a forbidden import fails here even if no test
happens to execute the line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import otel_loopguard

PACKAGE = Path(otel_loopguard.__file__).parent
DESIGN = PACKAGE.parent / "docs" / "design.md"

TOP = "*.py"
"""The modules at the package's top: the public API and what it alone is built from."""

LAYERS: dict[str, set[str]] = {
    "config/": set(),
    "engine/": {"config/"},
    "otel/": {"config/", "engine/"},
    "stores/": {"config/", "engine/"},
    "recorded/": {"config/", "engine/", "otel/"},
    TOP: {"config/", "engine/", "otel/", "stores/"},
    "integrations/": {"engine/", "otel/", TOP},
    "services/": {"config/", "engine/", "otel/", "stores/", "recorded/", TOP},
    "cli/": {"config/", "engine/", "otel/", "stores/", "recorded/", TOP, "services/"},
}
"""Each layer, from the bottom up, and the layers it may import."""

NOT_YET: set[tuple[str, str]] = set()
"""Imports against the layers, each to be moved (none now)."""

OUTSIDE: dict[str, tuple[str, ...]] = {
    "engine/": ("opentelemetry", "redis"),
    "config/": ("opentelemetry",),
    "stores/": ("opentelemetry",),
}
"""What a layer may not import from beyond the package."""

VOCABULARY = {"records.py", "usage.py", "verdict.py", "messages.py", "__init__.py"}
ENGINE_PARTS: dict[str, set[str]] = {
    "vocabulary": set(),
    "identity/": {"vocabulary"},
    "detection/": {"vocabulary"},
    "state/": {"vocabulary", "identity/", "detection/"},
    "replay.py": {"vocabulary", "identity/", "detection/", "state/"},
}
"""The engine's parts and what each may import of the others: detection reads a scope through
protocols, so it imports neither identity nor state."""


def imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved), each with the
    names taken from it (``from x import y`` gives ``x`` and ``x.y``)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def layer_of(path: Path) -> str:
    first = path.relative_to(PACKAGE).parts[0]
    return TOP if first.endswith(".py") else f"{first}/"


def layer_named(module: str) -> str | None:
    """The layer a module of the package belongs to (``None``: not of the package)."""
    parts = module.split(".")
    if parts[0] != "otel_loopguard":
        return None
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return f"{parts[1]}/"
    return TOP  # a top module, or a name the package's ``__init__`` gives


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


MODULES = sorted(PACKAGE.rglob("*.py"))


def shown(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


@pytest.mark.parametrize("path", MODULES, ids=shown)
def test_a_module_imports_only_the_layers_its_own_may(path: Path) -> None:
    own = layer_of(path)
    excused = tuple(module for where, module in NOT_YET if where == shown(path))
    wrong = sorted(
        name
        for name in imported_modules(path)
        if layer_named(name) not in (None, own, *LAYERS[own]) and not under(name, excused)
    )
    assert wrong == [], f"{own} may import only {sorted(LAYERS[own])}"


@pytest.mark.parametrize("path", MODULES, ids=shown)
def test_a_module_imports_nothing_its_layer_may_not_from_beyond_the_package(path: Path) -> None:
    forbidden = OUTSIDE.get(layer_of(path), ())
    assert sorted(n for n in imported_modules(path) if under(n, forbidden)) == []


def test_the_exceptions_still_exist() -> None:
    # An exception that no longer holds is deleted, so that it cannot come back unseen.
    for where, module in NOT_YET:
        assert module in imported_modules(PACKAGE / where), (where, module)


def test_each_layer_imports_only_layers_below_it() -> None:
    order = list(LAYERS)
    for number, (layer, allowed) in enumerate(LAYERS.items()):
        assert allowed <= set(order[:number]), layer


def test_the_layers_are_the_packages() -> None:
    packages = {f"{d.name}/" for d in PACKAGE.iterdir() if (d / "__init__.py").exists()}
    assert set(LAYERS) == packages | {TOP}
    assert all(list((PACKAGE / layer).rglob("*.py")) for layer in packages)


def engine_part(path: Path) -> str:
    parts = path.relative_to(PACKAGE / "engine").parts
    if len(parts) > 1:
        return f"{parts[0]}/"
    return "vocabulary" if parts[0] in VOCABULARY else parts[0]


def engine_part_named(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["otel_loopguard", "engine"] or len(parts) < 3:
        return None
    if (PACKAGE / "engine" / parts[2]).is_dir():
        return f"{parts[2]}/"
    if (PACKAGE / "engine" / f"{parts[2]}.py").exists():
        return "vocabulary" if f"{parts[2]}.py" in VOCABULARY else f"{parts[2]}.py"
    return None  # a name the engine's ``__init__`` would give: it gives none


ENGINE = sorted((PACKAGE / "engine").rglob("*.py"))


@pytest.mark.parametrize("path", ENGINE, ids=shown)
def test_an_engine_part_imports_only_the_parts_below_it(path: Path) -> None:
    own = engine_part(path)
    assert own in ENGINE_PARTS, f"{shown(path)}: a part of the engine that ENGINE_PARTS lacks"
    wrong = sorted(
        name
        for name in imported_modules(path)
        if engine_part_named(name) not in (None, own, *ENGINE_PARTS[own])
    )
    assert wrong == [], f"{own} may import only {sorted(ENGINE_PARTS[own])}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def circles(edges: dict[str, list[str]]) -> list[set[str]]:
    """Sets of modules that import each other, through any number of steps (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = {stack.pop()}
            while node not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.append(group)

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return found


def test_no_two_modules_import_each_other() -> None:
    names = {module_name(path): path for path in MODULES}
    edges = {
        name: sorted((imported_modules(path) & names.keys()) - {name})
        for name, path in names.items()
    }
    assert circles(edges) == []


def test_a_circle_through_several_modules_is_found() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["a"]}
    assert circles(edges) == [{"a", "b", "c"}]


ADAPTERS = sorted(p for p in (PACKAGE / "integrations").glob("*.py") if p.name != "_kit.py")


@pytest.mark.parametrize("path", ADAPTERS, ids=shown)
def test_an_adapter_takes_the_internals_only_from_its_kit(path: Path) -> None:
    public = set(otel_loopguard.__all__)
    wrong = []
    for name in imported_modules(path):
        parts = name.split(".")
        if parts[0] != "otel_loopguard" or under(name, ("otel_loopguard.integrations",)):
            continue
        if len(parts) == 2 and parts[1] in public:
            continue  # ``from .. import LoopGuard``: the public API
        if name != "otel_loopguard":
            wrong.append(name)
    assert sorted(wrong) == []


def test_the_kit_imports_only_the_package() -> None:
    kit = imported_modules(PACKAGE / "integrations" / "_kit.py")
    assert sorted(n for n in kit if n.split(".")[0] not in ("otel_loopguard", "__future__")) == []


def test_no_module_outside_the_adapters_imports_them() -> None:
    for path in MODULES:
        if layer_of(path) != "integrations/":
            assert not any(
                under(n, ("otel_loopguard.integrations",)) for n in imported_modules(path)
            ), path


_COUNTS = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11}


def design_layers() -> tuple[int, dict[str, set[str]]]:
    """What docs/design.md says: how many layers, and each layer's entry with what it may
    import, in the order it lists them."""
    text = DESIGN.read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    count = re.search(r"The package has (\w+) layers", section)
    assert count is not None, "design.md's Layers section says how many layers there are"
    entries = re.findall(r"^- `([^`]+)`(.*?)(?=^- `|^\S)", section, re.MULTILINE | re.DOTALL)
    listed: dict[str, set[str]] = {}
    for layer, body in entries:
        rule = re.search(r"May import: (.*?)\.\s*$", " ".join(body.split()))
        assert rule is not None, f"design.md: the entry of {layer} says what it may import"
        allowed = set(re.findall(r"`([^`]+)`", rule.group(1)))
        assert allowed or rule.group(1) == "nothing of the package", layer
        listed[layer] = allowed
    return _COUNTS.get(count.group(1), -1), listed


def test_design_md_lists_the_layers_as_the_code_has_them() -> None:
    count, listed = design_layers()
    assert list(listed) == list(LAYERS)  # the same layers, in the same order (bottom up)
    assert listed == LAYERS  # each allowed the same layers
    assert count == len(LAYERS)


def test_settings_hold_data_not_compiled_objects() -> None:
    from otel_loopguard.config.settings import resolve

    settings = resolve(
        otel_loopguard.load_config({"enabled": True, "toolSpans": [{"spanName": "tool\\..*"}]})
    )
    assert "re.compile" not in repr(settings)
    assert "Pattern" not in repr(settings)
