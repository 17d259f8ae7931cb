"""Reading tool-call spans across conventions: OTel GenAI, OpenInference, OpenLLMetry, and the
Vercel AI SDK's own telemetry (``ai.toolCall`` and ``ai.*.doGenerate``/``doStream`` spans).

A span's attributes arrive as a mapping (``otel.reader``: the SDK span's own dict, no
proxy and no copy), and a span with none of the keys of :func:`relevant_keys` goes no further. The
functions here take that mapping, the span's name, status and events, and never raise on odd
values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..config.settings import GlobalSettings
from ..engine.detection.replies import Reply
from ..engine.identity.names import MAX_NAME_CHARS, bounded

COMPACTION_ATTRIBUTE = "loopguard.compaction"
AGENT_SPAN_PREFIX = "invoke_agent"
"""How the GenAI conventions name an agent's run span (``invoke_agent {agent}``): tracked from
its start, as some frameworks (Google ADK) set its attributes only after it started."""

_HAYSTACK_OUTPUT = "haystack.agent.step.tool.output"
AI_SDK_OPERATION = "ai.operationId"
"""The Vercel AI SDK's span kind (its telemetry, ``experimental_telemetry: {isEnabled: true}``,
``ai`` 4.x to 6.x): ``ai.toolCall`` for a tool call, ``ai.generateText.doGenerate`` and
``ai.streamText.doStream`` (``generateObject``/``streamObject`` alike) for one model call, which
carries the GenAI ``gen_ai.usage.*`` counts and finish reasons but no ``gen_ai.operation.name``;
the ``ai.generateText`` span around them is the run, its usage the calls' total (``ai.usage.*``,
never read). A tool call's span has ``ai.toolCall.name``/``.id``/``.args`` from its start and
``ai.toolCall.result`` at its end (both JSON text, recorded unless ``recordOutputs`` is off)."""
AI_SDK_TOOL_CALL = "ai.toolCall"
_AI_SDK_MODEL_CALLS = (
    "ai.generateText.doGenerate",
    "ai.streamText.doStream",
    "ai.generateObject.doGenerate",
    "ai.streamObject.doStream",
)
_TOOL_NAME = (
    "gen_ai.tool.name",
    "tool.name",
    "traceloop.entity.name",
    "haystack.tool.name",
    "ai.toolCall.name",
)
_ARGUMENTS = (
    "gen_ai.tool.call.arguments",
    "tool_arguments",
    "input.value",
    "traceloop.entity.input",
    "haystack.agent.step.tool.input",
    "ai.toolCall.args",
)
_RESULT = (
    "gen_ai.tool.call.result",
    "tool_response",
    "output.value",
    "traceloop.entity.output",
    _HAYSTACK_OUTPUT,
    "ai.toolCall.result",
)
HAYSTACK_TOOL_SPAN = "haystack.agent.step.tool"
"""Haystack's span of one tool call (its tags: ``haystack.tool.name``, and with content tracing on
``haystack.agent.step.tool.input``/``.output``; ``haystack.tool.error`` when the call failed)."""
_HAYSTACK_ERROR = "haystack.tool.error"
_CALL_ID = ("gen_ai.tool.call.id", "tool.id", "tool_call.id", "ai.toolCall.id")
_AGENT = ("gen_ai.agent.id", "gen_ai.agent.name", "agent.name")
_AGENT_KEYS = frozenset(_AGENT)
_CONVERSATION = ("gen_ai.conversation.id", "session.id")

_KINDS = (
    "gen_ai.operation.name",
    "openinference.span.kind",
    "traceloop.span.kind",
    "llm.request.type",  # OpenLLMetry's model calls
    AI_SDK_OPERATION,
)
_INFERENCE_OPERATIONS = ("chat", "text_completion", "generate_content")
"""A tuple, tested by equality: an attribute read from a file may be a map (unhashable)."""
_MODEL = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_KEYS = frozenset(
    (
        *_KINDS,
        *_TOOL_NAME,
        *_ARGUMENTS,
        *_RESULT,
        *_CALL_ID,
        *_AGENT,
        *_CONVERSATION,
        "error.type",
        _HAYSTACK_ERROR,
        COMPACTION_ATTRIBUTE,
    )
)


class ToolCallView(NamedTuple):
    """What a span says about its call: tool name, raw arguments (if any yet), call id.

    ``has_arguments``: an argument attribute is present, whatever its value (``{}``, ``""``:
    a tool called with no arguments). Absent, the arguments were not recorded (yet, or at
    all: content capture off), which is not the same as none.
    """

    tool: str
    arguments: object
    has_arguments: bool
    call_id: str | None
    named: bool = True
    """The tool is named by an attribute, not only by the span's name (a guess: OpenInference
    names CrewAI's tool spans ``read_file.run``)."""


def relevant_keys(settings: GlobalSettings) -> frozenset[str]:
    """Every attribute key the readers look at under these settings."""
    extra = {key for key, _ in settings.tool_span_attributes}
    if settings.scope.startswith("attribute:"):
        extra.add(settings.scope.removeprefix("attribute:"))
    return _KEYS | extra


def _first(attributes: Mapping[str, Any], keys: Sequence[str]) -> object:
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def _first_text(attributes: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            text = _text(value)
            if text:
                return text
    return None


def _text(value: object) -> str | None:
    """A name or id as bounded text (see :func:`bounded`), or ``None``."""
    if type(value) is str:
        return bounded(value) if value else None
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 64:  # str() refuses ints of more than 4 300 digits
            return bounded(f"0x{value:x}")
        return str(value)
    if isinstance(value, float):
        return str(value)
    return None


def is_agent_span(attributes: Mapping[str, Any], name: str = "") -> bool:
    """Whether a span is an agent's run (``invoke_agent``, an OpenInference or Traceloop agent,
    or a span named ``invoke_agent ...`` whose attributes come later): the span a run's abort
    marks failed."""
    return (
        name.startswith(AGENT_SPAN_PREFIX)
        or attributes.get("gen_ai.operation.name") in ("invoke_agent", "create_agent")
        or attributes.get("openinference.span.kind") == "AGENT"
        or attributes.get("traceloop.span.kind") == "agent"
    )


def is_inference_span(attributes: Mapping[str, Any]) -> bool:
    """Whether a span is one model call (GenAI ``chat``/``text_completion``/
    ``generate_content``, an OpenInference LLM span, an OpenLLMetry one, the Vercel AI SDK's
    ``doGenerate``/``doStream``): never an agent's span, whose usage totals repeat its model
    calls'."""
    operation = attributes.get("gen_ai.operation.name")
    if operation is not None:
        return operation in _INFERENCE_OPERATIONS
    return (
        attributes.get("openinference.span.kind") == "LLM"
        or attributes.get("llm.request.type") in ("chat", "completion")
        or attributes.get(AI_SDK_OPERATION) in _AI_SDK_MODEL_CALLS
    )


def model_of(attributes: Mapping[str, Any]) -> str | None:
    """The model a model call's span names (its response's, else its request's), bounded."""
    return _first_text(attributes, _MODEL)


_FINISH_REASONS = "gen_ai.response.finish_reasons"
_OUTPUT_MESSAGES = "gen_ai.output.messages"
_TOOL_REASONS = frozenset(
    {"tool_calls", "tool_call", "tool_use", "function_call", "tool-calls"}  # last: AI SDK's
)
_UNUSABLE_REASONS = frozenset(
    {
        "length",
        "max_tokens",
        "max_output_tokens",
        "content_filter",
        "content-filter",
        "safety",
        "recitation",
    }
)
"""Finish reasons of a reply the agent cannot use as it is (OpenAI's ``length`` and
``content_filter``, Anthropic's ``max_tokens``, Gemini's ``MAX_TOKENS``, ``SAFETY``,
``RECITATION``, the Vercel AI SDK's ``content-filter``, compared in lower case)."""
_MAX_REASONS = 8
_TOOL_PART = '"tool_call"'
_MAX_OUTPUT_SEARCH = 1 << 16
"""Characters of a recorded reply searched for a tool call part (a bounded read)."""


MODEL_CALL_KEYS = frozenset((*_MODEL, _FINISH_REASONS, _OUTPUT_MESSAGES))
"""The keys read of a model call's span beyond :func:`relevant_keys` (its model and reply; its
usage: ``otel.spent.USAGE_KEYS``)."""


def reply_kind(attributes: Mapping[str, Any]) -> Reply | None:
    """What a model call's reply was, read from its finish reasons first: a tool call (a tool
    finish reason), a reply the agent cannot use (cut off at its length, filtered: it will ask
    again), else an answer (it finished: to the user, at a turn's end). Only where the span
    gives no finish reason is the recorded reply searched, for a ``tool_call`` part (a bounded
    read). ``None`` when the span says neither.

    An agent that reads its actions from the reply's text (mini-swe-agent) finishes every reply
    with ``stop``, the ones it rejects for their format too: those are told apart by a reader
    of its own log (``replay``), never by guessing from a span.
    """
    reasons = attributes.get(_FINISH_REASONS)
    if type(reasons) is str:
        reasons = (reasons,)
    if reasons and (type(reasons) is tuple or isinstance(reasons, Sequence)):
        unusable = True
        for reason in reasons[:_MAX_REASONS]:
            if type(reason) is not str:
                unusable = False
                continue
            if reason in _TOOL_REASONS:  # as the conventions write them: no lower-casing
                return "tool"
            reason = reason.lower()
            if reason in _TOOL_REASONS:
                return "tool"
            unusable = unusable and reason in _UNUSABLE_REASONS
        return "rejected" if unusable else "answer"
    messages = attributes.get(_OUTPUT_MESSAGES)
    if isinstance(messages, str):
        return "tool" if messages.find(_TOOL_PART, 0, _MAX_OUTPUT_SEARCH) >= 0 else "answer"
    return None


def is_tool_span(attributes: Mapping[str, Any], name: str, settings: GlobalSettings) -> bool:
    """Whether a span is a tool call under any known convention or a configured rule."""
    if attributes.get("gen_ai.operation.name") == "execute_tool":
        return True
    if attributes.get("openinference.span.kind") == "TOOL":
        return True
    if attributes.get("traceloop.span.kind") == "tool":
        return True
    if attributes.get(AI_SDK_OPERATION) == AI_SDK_TOOL_CALL:
        return True
    if name == HAYSTACK_TOOL_SPAN:
        return True
    for key, expected in settings.tool_span_attributes:
        value = attributes.get(key)
        if value is not None and (expected is None or value == expected):
            return True
    names = settings.tool_span_names
    # A configured pattern may be slow on long text: names past the bound are never tool names.
    return (
        bool(names)
        and len(name) <= MAX_NAME_CHARS
        and any(re.fullmatch(pattern, name) for pattern in names)
    )


_DSPY_SUFFIXES = (".__call__", ".acall", ".forward", ".aforward")
_METHOD_SUFFIXES = (".tool", *_DSPY_SUFFIXES)
"""How instrumentations name a tool span after the tool's method: OpenLLMetry ``X.tool``,
OpenInference's DSPy ``X.__call__`` (``X.acall`` called async; ``X.forward`` / ``X.aforward``
for a module used as a tool)."""
_KWARGS_TEXT = re.compile(r'\{\s*"kwargs"\s*:')


def _named_by_span(span_name: str) -> tuple[str | None, bool]:
    """The tool a tool span's name gives, when no attribute names it, and whether the name is
    DSPy's (``X.__call__``, ``X.forward``: its arguments are recorded as ``{"kwargs": ...}``)."""
    name = span_name or ""
    if name.startswith("execute_tool "):
        name = name[len("execute_tool ") :]
    dspy = False
    for suffix in _METHOD_SUFFIXES:
        if name.endswith(suffix):
            name, dspy = name[: -len(suffix)], suffix in _DSPY_SUFFIXES
            break
    name = name.strip()
    return (bounded(name), dspy) if name else (None, False)


def _keyword_arguments(arguments: object) -> object:
    """The keyword arguments of DSPy's ``{"kwargs": {...}}`` (as JSON text or a mapping), or
    ``arguments`` as they are: the call's own arguments, as the tool was asked with them."""
    value = arguments
    if isinstance(arguments, str):
        if _KWARGS_TEXT.match(arguments) is None:
            return arguments
        try:
            value = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("kwargs"), dict):
        return value["kwargs"]
    return arguments


def read_call(attributes: Mapping[str, Any], span_name: str) -> ToolCallView | None:
    """The call a tool span describes, or ``None`` when it has no usable tool name."""
    # The OTel GenAI keys come first in every lookup order: try them before the loops.
    tool = attributes.get("gen_ai.tool.name")
    named, dspy = True, False
    if type(tool) is str and 0 < len(tool) <= MAX_NAME_CHARS:
        pass  # the usual case
    else:
        tool = _first_text(attributes, _TOOL_NAME)
        if not tool:
            (tool, dspy), named = _named_by_span(span_name), False
            if tool is None:
                return None
    arguments = attributes.get("gen_ai.tool.call.arguments")
    if arguments is None or arguments == "":
        arguments = _first(attributes, _ARGUMENTS)
    recorded = arguments is not None or any(key in attributes for key in _ARGUMENTS)
    if dspy:
        arguments = _keyword_arguments(arguments)
    call_id = attributes.get("gen_ai.tool.call.id")
    if type(call_id) is not str or not 0 < len(call_id) <= MAX_NAME_CHARS:
        call_id = _first_text(attributes, _CALL_ID)
    return ToolCallView(tool, arguments, recorded, call_id, named)


def tool_named_by_span(name: str) -> str | None:
    """The tool a span's name says it runs (``execute_tool {tool}``, the GenAI span name),
    for a span whose attributes come only at its end (Google ADK's)."""
    if not name.startswith("execute_tool ") or len(name) > MAX_NAME_CHARS:
        return None
    return name[len("execute_tool ") :].strip() or None


_ARGUMENT_EVENT = "gen_ai.tool.message"
_RESULT_EVENT = "gen_ai.choice"


def _event_value(events: Sequence[Any], event_name: str, key: str) -> object:
    """The newest ``event_name`` event's ``key`` attribute (Strands Agents records a tool's
    arguments and result as events by default, not attributes)."""
    for event in reversed(events):
        if getattr(event, "name", None) == event_name:
            value = (getattr(event, "attributes", None) or {}).get(key)
            if value is not None:
                return value
    return None


def arguments_in_events(events: Sequence[Any]) -> object:
    """A tool span's arguments recorded as an event (``gen_ai.tool.message``'s ``content``:
    Strands Agents 1.x), or ``None``."""
    return _event_value(events, _ARGUMENT_EVENT, "content") if events else None


def result_in_events(events: Sequence[Any]) -> object:
    """A tool span's result recorded as an event (``gen_ai.choice``'s ``message``: Strands
    Agents 1.x), or ``None``."""
    return _event_value(events, _RESULT_EVENT, "message") if events else None


def result_of(attributes: Mapping[str, Any]) -> object:
    """The raw result recorded on a span, or ``None``."""
    result = attributes.get("gen_ai.tool.call.result")
    if result is not None and result != "":
        return result
    return _first(attributes, _RESULT)


def may_record_failure(attributes: Mapping[str, Any]) -> bool:
    """Whether a span whose status is not ERROR may still record a failure (``error.type``, or
    Haystack's ``haystack.tool.error`` tag: its failed calls' spans stay OK)."""
    return "error.type" in attributes or attributes.get(_HAYSTACK_ERROR) is True


def error_of(
    attributes: Mapping[str, Any],
    status_is_error: bool,
    status_description: str | None,
    events: Sequence[Any],
) -> str | None:
    """The call's error message, if the span records a failure."""
    haystack_failed = attributes.get(_HAYSTACK_ERROR) is True  # an OK span: only the tag says
    if not events and not (status_is_error or haystack_failed) and "error.type" not in attributes:
        return None
    exception_message: str | None = None
    for event in events:
        if getattr(event, "name", None) == "exception":
            event_attributes = getattr(event, "attributes", None) or {}
            exception_message = _text(event_attributes.get("exception.message")) or _text(
                event_attributes.get("exception.type")
            )
    error_type = _text(attributes.get("error.type"))
    if not (status_is_error or error_type or exception_message or haystack_failed):
        return None
    # Haystack records a failed call's error only in its output tag: ``{"error": "..."}``.
    failure = _text(attributes.get(_HAYSTACK_OUTPUT)) if haystack_failed else None
    parts = [p for p in (exception_message, status_description, error_type, failure) if p]
    return parts[0] if parts else "error"


def agent_of(attributes: Mapping[str, Any]) -> str | None:
    """The agent id recorded on this span itself."""
    if _AGENT_KEYS.isdisjoint(attributes):
        return None  # the usual tool span: its agent is an ancestor's
    return _first_text(attributes, _AGENT)


def scope_value(attributes: Mapping[str, Any], scope: str) -> str | None:
    """The scope key this span names under the configured scope, or ``None`` (use the trace)."""
    if scope == "trace":
        return None
    if scope == "conversation":
        value = _text(_first(attributes, _CONVERSATION))
        return f"conversation:{value}" if value else None
    attribute = scope.removeprefix("attribute:")
    value = _text(attributes.get(attribute))
    return f"{attribute}:{value}" if value else None


def is_compaction(attributes: Mapping[str, Any], name: str, settings: GlobalSettings) -> bool:
    """Whether an ended span marks a compaction retry (which arms the post-compaction guard)."""
    marker = attributes.get(COMPACTION_ATTRIBUTE)
    if marker is not None and (
        marker is True or (isinstance(marker, str) and marker.lower() == "true")
    ):
        return True
    if settings.compaction_span_names and name in settings.compaction_span_names:
        return True
    operation = attributes.get("gen_ai.operation.name")
    return isinstance(operation, str) and operation in settings.compaction_operation_names
