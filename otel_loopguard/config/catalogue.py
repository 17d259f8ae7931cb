"""Every setting as it is declared: read from the model (``model.py``, ``blocks.py``), where each
field holds its type, bounds, doc line and variable, and each detector's switch comes from
``detectors.py``.

The environment's variables, the errors' "allowed: ...", ``otel-loopguard validate``'s rows and
the docs' tables (``doctables.py``) read this list, so none of them keeps one of its own.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from .blocks import Block
from .globals import GlobalSettings
from .model import LoopDetectionConfig
from .redaction import redact_url
from .settings import DEFAULT_POLL_RULES, DEFAULT_VOLATILE_KEYS, Budget, PollRule

__all__ = ["Setting", "by_key", "declared", "env_fields", "shown", "value_of"]

Form = Literal["boolean", "integer", "number", "text", "list", "mapping"]


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: where it sits, what it does, what it takes, where its value ends up."""

    key: str
    """As a configuration file writes it, from the ``loopDetection`` block: ``store.timeoutMs``."""
    path: tuple[str, ...]
    """The model's attribute names down to it: ``("store", "timeout_ms")``."""
    doc: str
    form: Form
    env: str | None
    """Its ``OTEL_LOOPGUARD_*`` variable, if it has one."""
    resolved: str
    """Where its effective value is: a field of ``ResolvedConfig`` (dotted: ``budget.tokens``)
    or, for a global-only setting, of ``GlobalSettings``."""
    global_only: bool
    block: type[BaseModel] = field(repr=False, compare=False)
    """The block that declares it."""
    given_allowed: str | None = None

    @property
    def allowed(self) -> str:
        """What a value may be, in words: as declared, else from its type and bounds."""
        if self.given_allowed is not None:
            return self.given_allowed
        return _allowed_in(self.block, self.key.rsplit(".", 1)[-1])


@cache
def declared() -> tuple[Setting, ...]:
    """Every setting of a ``loopDetection`` block, in the model's order (read from the fields
    alone: the environment reads this list while an application starts)."""
    return tuple(_walk(LoopDetectionConfig, (), False))


@cache
def by_key() -> Mapping[str, Setting]:
    """The declared settings by key, camelCase as a file writes it."""
    return {s.key: s for s in declared()}


def env_fields() -> dict[str, tuple[str, ...]]:
    """Each ``OTEL_LOOPGUARD_*`` variable of a setting, and the setting's key as a path."""
    return {s.env: tuple(s.key.split(".")) for s in declared() if s.env}


def _walk(model: type[BaseModel], path: tuple[str, ...], global_only: bool) -> list[Setting]:
    found: list[Setting] = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        is_global = global_only or extra.get("global") is True
        inner = _block_of(info.annotation)
        if inner is not None and info.description is None:
            found.extend(_walk(inner, (*path, name), is_global))
            continue
        key = ".".join([*(to_camel(p) for p in path), info.alias or name])
        resolved = extra.get("resolved")
        if not isinstance(resolved, str):
            resolved = f"budget.{name}" if path == ("budget",) else name
        allowed, env = extra.get("allowed"), extra.get("env")
        found.append(
            Setting(
                key=key,
                path=(*path, name),
                doc=info.description or "",
                form=_form_of(info.annotation),
                env=env if isinstance(env, str) else None,
                resolved=resolved,
                global_only=is_global,
                block=model,
                given_allowed=allowed if isinstance(allowed, str) else None,
            )
        )
    return found


def _form_of(annotation: object) -> Form:
    """A field's form, from its type: the union's parts, constraints unwrapped."""
    kinds: set[object] = set()
    pending = [annotation]
    while pending:
        part = pending.pop()
        origin = typing.get_origin(part)
        if origin is typing.Literal:
            kinds.add(str)
        elif origin in (list, dict):
            kinds.add(origin)
        elif origin is not None:  # a union, or Annotated[type, constraints]
            args = typing.get_args(part)
            pending.extend(args[:1] if origin is Annotated else args)
        else:
            kinds.add(part)
    if bool in kinds:
        return "boolean"
    if list in kinds:
        return "list"
    if dict in kinds:
        return "mapping"
    if float in kinds:
        return "number"
    return "integer" if int in kinds else "text"


@cache
def _allowed_in(block: type[BaseModel], alias: str) -> str:
    schema = _schema(block)
    return _allowed(schema["properties"][alias], schema)


@cache
def _schema(block: type[BaseModel]) -> dict[str, Any]:
    return block.model_json_schema(by_alias=True)


def _block_of(annotation: object) -> type[Block] | None:
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, Block):
            return arg
    return None


def _options(prop: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The forms a value may take, ``null`` (unset) left out."""
    options = prop.get("anyOf", [prop])
    return [o for o in options if o.get("type") != "null"]


def _allowed(prop: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """What a value may be, in words, from the field's JSON schema (its type and bounds)."""
    option = _options(prop)[0]
    kind = option.get("type")
    if "enum" in option:
        return " or ".join(repr(v) for v in option["enum"])
    if kind == "boolean":
        return "true or false"
    if kind == "integer":
        return _range("an integer", option)
    if kind == "number" or "anyOf" in option:
        return _range("a number", option)
    if kind == "string":
        return "a non-empty string" if option.get("minLength") else "a string"
    if kind == "array":
        return f"a list of {_plural(option['items'], schema)}"
    if kind == "object":
        return f"a mapping of names to {_plural(option['additionalProperties'], schema)}"
    return "see the docs"  # pragma: no cover - every declared type is named above


def _range(noun: str, option: Mapping[str, Any]) -> str:
    low = option.get("minimum", option.get("ge"))
    above = option.get("exclusiveMinimum", option.get("gt"))
    high = option.get("maximum", option.get("le"))
    parts = [noun]
    if low is not None:
        parts.append(f">= {_number(low)}")
    elif above is not None:
        parts.append(f"> {_number(above)}")
    text = " ".join(parts)
    return text if high is None else f"{text} and at most {_number(high)}"


def _number(value: float) -> str:
    if isinstance(value, int) and value >= 10**9 and str(value).rstrip("0") == "1":
        return f"10^{len(str(value)) - 1}"
    return f"{value:,}".replace(",", " ") if isinstance(value, int) else f"{value:g}"


def _plural(item: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    ref = item.get("$ref")
    if ref is None:
        return "non-empty strings" if item.get("minLength") else "strings"
    inner = schema["$defs"][ref.rsplit("/", 1)[-1]]
    required = set(inner.get("required", ()))
    keys = [k if k in required else f"{k}?" for k in inner["properties"]]
    return "{" + ", ".join(keys) + "}"


def value_of(setting: Setting, resolved: object) -> object:
    """The effective value of ``setting`` in ``resolved`` (a ``ResolvedConfig``, or for a
    global-only setting the ``GlobalSettings``)."""
    value = resolved
    for part in setting.resolved.split("."):
        if value is None and part in Budget.__slots__:
            value = Budget()  # no budget: its warnAt is still the default one
        value = getattr(value, part)
    return value


_PASS_THROUGH_WORDS = "HTTP, database, messaging and web instrumentations"


def shown(value: object) -> str:
    """A value as ``validate`` and the docs show it: in a configuration's words, a default
    list summed up, and a store's password never."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return redact_url(value) if "://" in value else value
    if isinstance(value, frozenset):
        if value == frozenset(DEFAULT_VOLATILE_KEYS):
            return f"{len(value)} ids and timestamps"
        if value == GlobalSettings().pass_through_scopes:
            return f"{len(value)} {_PASS_THROUGH_WORDS}"
        return ", ".join(sorted(map(str, value))) or "none"
    if isinstance(value, tuple):
        if value == DEFAULT_POLL_RULES:
            return "command_status, process(action: poll|log)"
        return ", ".join(_item(item) for item in value) or "none"
    return str(value)


def _item(item: object) -> str:
    if isinstance(item, PollRule):
        if not item.args:
            return item.tool
        args = "; ".join(
            f"{key}: {'|'.join(sorted(map(str, values)))}" for key, values in item.args
        )
        return f"{item.tool}({args})"
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], tuple):
        model, prices = item  # a model's input, output and cached input price per million
        entry, out, cached = prices
        return f"{model}: {entry:g} in, {out:g} out, {cached:g} cached per million"
    return str(item)
