"""The package's layers: a pure engine, a config layer, OpenTelemetry glue, the CLI.

Read from the source (no import needed), so a forbidden import fails here even if no test
happens to execute the line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import otel_loopguard

PACKAGE = Path(otel_loopguard.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
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


def modules_of(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


def forbidden(path: Path, prefixes: tuple[str, ...]) -> list[str]:
    return sorted(
        name
        for name in imported_modules(path)
        if any(name == p or name.startswith(p + ".") for p in prefixes)
    )


@pytest.mark.parametrize("path", modules_of("engine"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_engine_imports_no_opentelemetry_and_no_outer_layer(path: Path) -> None:
    outer = ("otel_loopguard.otel", "otel_loopguard.cli", "otel_loopguard.guard")
    assert forbidden(path, ("opentelemetry", *outer)) == []


@pytest.mark.parametrize("path", modules_of("config"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_config_layer_imports_neither_the_engine_nor_opentelemetry(path: Path) -> None:
    outer = ("otel_loopguard.engine", "otel_loopguard.otel", "otel_loopguard.cli")
    assert forbidden(path, ("opentelemetry", *outer)) == []


@pytest.mark.parametrize("path", modules_of("stores"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_shared_stores_import_no_opentelemetry_and_no_outer_layer(path: Path) -> None:
    outer = ("otel_loopguard.otel", "otel_loopguard.cli", "otel_loopguard.guard")
    assert forbidden(path, ("opentelemetry", *outer)) == []


def test_the_engine_does_not_import_the_shared_stores() -> None:
    for path in modules_of("engine"):
        assert forbidden(path, ("otel_loopguard.stores", "redis")) == [], path.name


@pytest.mark.parametrize("path", modules_of("otel"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_opentelemetry_layer_does_not_import_the_api_or_the_cli(path: Path) -> None:
    api = ("otel_loopguard.guard", "otel_loopguard.processor", "otel_loopguard.cli")
    assert forbidden(path, api) == []


def test_every_layer_has_modules() -> None:
    assert all(modules_of(layer) for layer in ("engine", "config", "otel", "stores", "cli"))


def test_settings_hold_data_not_compiled_objects() -> None:
    from otel_loopguard.config.settings import resolve

    settings = resolve(
        otel_loopguard.load_config({"enabled": True, "toolSpans": [{"spanName": "tool\\..*"}]})
    )
    assert "re.compile" not in repr(settings)
    assert "Pattern" not in repr(settings)


def import_graph(layer: str) -> dict[str, set[str]]:
    """Each module of ``layer`` and the modules of the same layer it imports, at any place in
    the file (a deferred import inside a function is still an edge of a circle)."""
    root = f"otel_loopguard.{layer}"
    names = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for path in modules_of(layer)
    }
    graph: dict[str, set[str]] = {}
    for path in modules_of(layer):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        graph[name] = {m for m in imported_modules(path) if m in names and m not in (name, root)}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph``, each found once from its smallest module."""
    found: list[list[str]] = []

    def walk(start: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == start:
                found.append(path)
            elif nxt > start and nxt not in path:
                walk(start, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def test_circles_finds_an_import_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_config_layer_has_no_import_circle() -> None:
    assert circles(import_graph("config")) == []
