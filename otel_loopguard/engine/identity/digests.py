"""From a raw call (tool, arguments, result or error) to the digests the engine works on."""

from __future__ import annotations

import re
import sys
from typing import NamedTuple

from ...config.settings import WARNING_KEY, ResolvedConfig
from ..messages import MAX_SEARCH_CHARS, TAG, strip_messages
from ..records import UNRECORDED, CallKind, Outcome, ProposedCall
from . import fingerprint as fp
from . import shell, structured
from .additions import may_carry, without_message
from .names import openclaw_tool_name, unknown_tool_name


class OutcomeDigest(NamedTuple):
    """What the history keeps of a call's outcome (immutable; a named tuple is a third of a
    frozen dataclass's cost to make, and one is made per tool span)."""

    result_fp: int | None
    unknown_tool: str | None
    outcome: Outcome
    failure_fp: int | None = None


_EMPTY = OutcomeDigest(result_fp=None, unknown_tool=None, outcome="empty")
_VETO = OutcomeDigest(result_fp=None, unknown_tool=None, outcome="veto")


def digest_call(
    tool: str, args: object, cfg: ResolvedConfig, *, span: str | None = None
) -> ProposedCall:
    """The proposed call: tool, argument key, whether the tool is polling, and what its
    outcome is read as.

    ``args`` is :data:`UNRECORDED` for a span that recorded no arguments: the call is then
    the same call as no other (its key is made from ``span``, the span's id), and is read
    as a call of its tool with no known arguments.
    """
    if cfg.openclaw_tool_names:
        tool = openclaw_tool_name(tool)
    if args is UNRECORDED:
        return ProposedCall(
            tool=sys.intern(tool),
            args_fp=fp.unrecorded_key(tool, span or ""),
            is_poll=cfg.is_poll(tool, None),
            kind=structured.call_kind(tool, None),
            unrecorded=True,
        )
    key, value, value_fp, kwargs_fp = fp.call_keys(tool, args)
    shape_fp = edit_fp = None
    if cfg.shapes_read:
        shaped = shell.shape_of_arguments(value)
        if shell.is_edit(tool, shaped.command):
            # An editing tool's call is its edit; a shell command's, its text with line
            # addresses blanked (the same print inserted at another line is the same edit).
            # An edit's shape is the edit itself: two renames are two steps, the same fix
            # re-applied at another line is one.
            raw = shell.edit_text(tool, shaped)
            edit_fp = key | 1 if raw is None else fp.edit_key(tool, shell.edit_of_command(raw))
            shape_fp = edit_fp
        else:
            shape_fp = _shared_shape(fp.shape_key(tool, shaped.shape))
    return ProposedCall(  # positional: a named tuple is made faster so (one per new call)
        sys.intern(tool),  # tool
        key,  # args_fp
        cfg.is_poll(tool, value),  # is_poll
        value_fp,  # value_fp
        structured.call_kind(tool, value),  # kind
        kwargs_fp,  # kwargs_fp
        False,  # unrecorded
        shape_fp,  # shape_fp
        edit_fp,  # edit_fp
    )


_SHAPES: dict[int, int] = {}
_MAX_SHAPES = 4096


def _shared_shape(key: int) -> int:
    """One object per shape digest, for the windows' records to share: a run's calls come in
    far fewer shapes than calls (a healthy run's too), and an int of 60 bits takes 32 bytes.
    Only digests are kept; the table is emptied when it fills (a miss costs one object)."""
    found = _SHAPES.get(key)
    if found is None:
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        _SHAPES[key] = found = key
    return found


def digest_outcome(
    call: ProposedCall,
    result: object,
    error: str | None,
    cfg: ResolvedConfig,
    issued: str | None = None,
) -> OutcomeDigest:
    """The outcome: an error digest, a result digest (volatile keys dropped), or none at all.

    ``issued``: the message the guard gave this call (a warning the model saw), taken out of
    the result first, in whatever form the recording holds it (``additions.py``). An error is
    no progress by itself. OpenClaw's result object is read as OpenClaw reads it
    (``structured.py``); with ``any_object_result`` (``profile: openclaw``), every object
    result is; framework shapes as docs/shapes.md lists them. Without ``text_results_parsed``
    (``profile: openclaw``), a text result is compared whole, never read as JSON; a send's
    text, in both profiles, is its result of text alone (OpenClaw's object of it, no details).
    """
    if issued is not None and result is not None and may_carry(result):
        result = without_message(result, issued)
    if error is not None:
        return _error(call, error, result, cfg)
    if result is None:
        return _EMPTY
    return _result(call, result, cfg, unwrapped=False)


def _result(
    call: ProposedCall,
    result: object,
    cfg: ResolvedConfig,
    unwrapped: bool,
    parsed_from: str | None = None,
) -> OutcomeDigest:
    """``parsed_from``: the JSON text a mapping ``result`` was parsed from (it is then read
    once: its key is made from the parsed value, ``fp.parsed_result_key``)."""
    if isinstance(result, str):
        result = strip_messages(result)
        if (
            cfg.framework_results
            and result[:5].lower() == "error"
            and unknown_tool_name(result, tool=call.tool) is not None
        ):
            # A framework's answer to a call of a missing tool, given as the call's result
            # (LangGraph's ToolNode, Agno): the call failed.
            return _error(call, result, None, cfg)
        if not cfg.text_results_parsed:
            # OpenClaw digests a result that is not an object as it is: a text, JSON or not,
            # is compared whole, ids and timings in it included. But a span records its
            # result object as JSON text, always: that text is read as the object it was.
            if _STRUCTURED_START.match(result) is not None:
                parsed = fp.normalise(result).value
                if structured.is_tool_result(parsed):
                    return _read_structured(call, parsed, cfg)
            if call.kind != "send":
                return OutcomeDigest(result_fp=fp.text_key(result), unknown_tool=None, outcome="ok")
        elif _may_be_structured(result, cfg, call.kind):
            normal = fp.normalise(result)
            if type(normal.value) is dict:
                # Parsed once: what follows reads the value, and its key is made from it.
                result, parsed_from = normal.value, normal.text if normal.json_native else None
        if call.kind == "send" and isinstance(result, str):
            # A send's text is its result of text alone (OpenClaw's result object of that
            # text, no details): a send's outcome is its details without ids, here none, the
            # same on every call (ids and counts in the text are no progress), in both profiles.
            return _read_structured(call, structured.of_text(result), cfg)
    if type(result) is dict:
        if _carries_warning(result):
            # A warning the guard put in a mapping result (the message may be unknown here:
            # a completion's tool results); a tool's own key of that name stays.
            result = {k: v for k, v in result.items() if k != WARNING_KEY}
        if cfg.framework_results:
            if result.get("isError") is True:
                # MCP's CallToolResult of a failed call: its text is the error.
                return _error(call, _texts(result.get("content")) or "error", None, cfg)
            error = result.get("error")
            if isinstance(error, str) and unknown_tool_name(error, tool=call.tool) is not None:
                # Google ADK answers a call of a missing tool with {"error": ...}.
                return _error(call, error, None, cfg)
            if result.keys() == _RESULT_ONLY and not unwrapped:
                # Google ADK wraps a result that is not a mapping as {"result": ...}.
                return _result(call, result["result"], cfg, True, parsed_from)
        if structured.is_structured(result, any_object=cfg.any_object_result):
            return _read_structured(call, result, cfg)
        if call.kind in structured.DETAILS_ALONE:
            # OpenClaw's ``details`` recorded alone: a log's counts, a write's ``changed``, a
            # send's ids are read as in the whole object (exec and poll results keep our
            # exec-style view, which keeps more of them).
            return _read_structured(call, {"details": result}, cfg)
    volatile = cfg.volatile_keys
    if cfg.shapes_read and isinstance(result, str) and result[:2] not in _JSON_TEXT_STARTS:
        # A plain text is digested as its state: clock times, durations, pids and addresses
        # blanked (``shell.state_of_output``), as a JSON text's volatile values are dropped by
        # key (``volatileKeys``; blanking its numbers too would cost more than the rest of
        # the outcome's digest). A test run that fails alike in another number of seconds
        # gives one outcome, to every detector.
        result = shell.state_of_output(result) or result
    if parsed_from is not None and type(result) is dict:
        key = fp.parsed_result_key(result, parsed_from, volatile, exec_style=call.is_poll)
    else:
        key = fp.result_key(
            result, volatile, exec_style=call.is_poll, text=fp.result_text(volatile)
        )
    return OutcomeDigest(key, None, "ok")  # result_fp, unknown_tool, outcome (positional: faster)


def _carries_warning(result: dict[object, object]) -> bool:
    value = result.get(WARNING_KEY)
    return isinstance(value, str) and TAG in value[-MAX_SEARCH_CHARS:]


def _error(call: ProposedCall, error: str, result: object, cfg: ResolvedConfig) -> OutcomeDigest:
    """An error outcome. The missing tool's name is read from the error, else (a framework
    that answers the model in the result: ADK) from the result's text."""
    openclaw = cfg.openclaw_unknown_tool_patterns
    unknown = unknown_tool_name(error, openclaw=openclaw, tool=call.tool)
    if unknown is None and not openclaw and result is not None:
        unknown = unknown_tool_name(_error_text(result), tool=call.tool)
    if cfg.shapes_read:
        error = shell.state_of_output(error) or error  # its state, as a text result's
    return OutcomeDigest(fp.error_key(error), unknown, "error")  # positional, as in _result


def _error_text(result: object) -> str | None:
    """The text of a failed call's result: itself, or its ``error`` member."""
    if isinstance(result, str):
        return result
    error = result.get("error") if type(result) is dict else None
    return error if isinstance(error, str) else None


def _texts(content: object) -> str:
    """The text of a list of content parts (``[{"type": "text", "text": ...}]``)."""
    if type(content) is not list:
        return ""
    return "\n".join(
        part["text"] for part in content if type(part) is dict and isinstance(part.get("text"), str)
    )


_RESULT_ONLY = frozenset({"result"})
_OBJECT_START = re.compile(r"\s*\{")
_JSON_TEXT_STARTS = frozenset({'{"', "{}", "[{", '["', "[]", "[["})
"""How a serialiser's JSON object or array text starts (a shell's ``[1/3] ...`` does not)."""
_STRUCTURED_START = re.compile(r'\s*\{\s*"(?:content|details)"')
"""OpenClaw's result object has only ``content`` and ``details``: its text starts with one."""
_FRAMEWORK_START = re.compile(r'\s*\{\s*"(?:content|details|result|isError|structuredContent)"')
"""... and a framework's shapes (docs/shapes.md) with one of these."""


def _may_be_structured(text: str, cfg: ResolvedConfig, kind: CallKind | None) -> bool:
    """A test at the start of a result text, before parsing it: OpenClaw's result object, a
    framework's shape, or any JSON object under ``any_object_result`` or for a call whose
    ``details`` may be recorded alone (a log's, a write's, a send's, as in a mapping).
    Constant time: results are often large."""
    if cfg.any_object_result or kind in structured.DETAILS_ALONE:
        start = _OBJECT_START
    else:
        start = _FRAMEWORK_START if cfg.framework_results else _STRUCTURED_START
    return start.match(text) is not None


def _read_structured(
    call: ProposedCall, result: dict[str, object], cfg: ResolvedConfig
) -> OutcomeDigest:
    reading = structured.read(call.kind, result)
    if reading.veto:
        return _VETO
    volatile = cfg.volatile_keys
    return OutcomeDigest(  # positional, as in _result
        fp.value_result_key(reading.value, volatile),  # result_fp
        None,  # unknown_tool
        "unchanged" if reading.no_progress else "ok",  # outcome
        None if reading.failure is None else fp.value_result_key(reading.failure, volatile),
    )


class Digester:
    """``digest_call`` for one guard, remembering recent argument texts.

    Loops repeat the same argument texts, and parsing and re-encoding them is most of a call's
    cost. The memory maps the text's length and ``hash()`` to its key: never the text itself.
    ``hash()`` is per process, and so is this memory, which is never shared or kept; the
    fingerprints themselves are SHA-256. Results are not remembered: most carry an id or a
    timestamp that differs on every call, and a JSON result text is read in one scan anyway.
    Bounded (emptied when full); plain dict operations, atomic under the GIL.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._calls: dict[tuple[int, str, int, int], ProposedCall] = {}

    def call(self, tool: str, args: object, cfg: ResolvedConfig) -> ProposedCall:
        if not isinstance(args, str):
            return digest_call(tool, args, cfg)
        # id(cfg) is stable and unique here: the guard's settings hold every config it uses.
        key = (id(cfg), tool, len(args), hash(args))
        call = self._calls.get(key)
        if call is None:
            call = digest_call(tool, args, cfg)
            if len(self._calls) >= self._size:
                # Emptied rather than trimmed: popping the oldest of a dict, again and again,
                # makes each pop walk the holes the earlier ones left.
                self._calls.clear()
            self._calls[key] = call
        return call
