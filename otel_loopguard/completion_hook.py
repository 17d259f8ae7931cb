"""The GenAI completion hook: loops found from the model's own requests and responses, with no
content on any span.

The official OpenTelemetry GenAI instrumentations (``opentelemetry-instrumentation-genai-*``,
on ``opentelemetry-util-genai``) record no arguments or results by default, but they call a
*completion hook* on every model response, before its span ends, whatever the capture mode:
its ``outputs`` hold the tool calls the model proposes (name, arguments, call id), before any
of them runs, and the next request's ``inputs`` hold the results the tools gave. This hook turns
both into the guard's calls and outcomes, as digests only, and:

- judges each response's calls as a batch (as ``guard.check_batch`` does): if one is critical,
  all are blocked, so a missing tool, which never gets a span of its own, is stopped too;
- records each call's outcome by its call id, so a tool span without content still counts as
  the call with the result the model saw;
- marks the response's still-open span with the detection.

The verdicts reach the agent where it asks: ``guard.check()`` inside the tool span (by its call
id), ``@guard.tool``, the framework adapters. No argument or result text is kept, exported,
logged or sent to a store.

Selected with ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=loopguard`` (zero-code set-up does it
for you), or passed to an instrumentor: ``Instrumentor().instrument(completion_hook=
LoopGuardCompletionHook())``. A hook selected before ours is called after it when named by
``OTEL_LOOPGUARD_NEXT_COMPLETION_HOOK``.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, Protocol

from opentelemetry import trace

from ._proposals import Proposals, ScopeProposals
from .config.settings import ResolvedConfig
from .engine.identity.digests import OutcomeDigest, digest_outcome
from .engine.identity.names import bounded
from .engine.records import ProposedCall
from .engine.state.scope import Decision, ScopeState
from .engine.verdict import Verdict
from .otel import reader
from .otel.annotations import Mark
from .otel.live import LiveSpan
from .otel.outcomes import mark_of
from .otel.runtime import Runtime, runtime_of

__all__ = [
    "ENV_COMPLETION_HOOK",
    "ENV_NEXT_COMPLETION_HOOK",
    "HOOK_NAME",
    "LoopGuardCompletionHook",
    "completion_hook",
]

HOOK_NAME = "loopguard"
"""The hook's name in the entry-point group ``opentelemetry_genai_completion_hook``."""
ENV_COMPLETION_HOOK = "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK"
"""The variable ``opentelemetry-util-genai`` selects its one completion hook by."""
ENV_NEXT_COMPLETION_HOOK = "OTEL_LOOPGUARD_NEXT_COMPLETION_HOOK"
"""Another completion hook, by its entry-point name, to call after ours (util-genai takes one)."""

_INFERENCE = frozenset({"chat", "text_completion", "generate_content"})
"""The operations whose outputs are a model's response (not an agent's or a workflow's)."""

_logger = logging.getLogger("otel_loopguard")


class _Hook(Protocol):
    """A completion hook (``opentelemetry.util.genai.completion_hook.CompletionHook``)."""

    def on_completion(
        self,
        *,
        inputs: Any,
        outputs: Any,
        system_instruction: Any,
        tool_definitions: Any = None,
        span: Any = None,
        log_record: Any = None,
    ) -> None: ...


class _Seen(NamedTuple):
    """What a completion holds for the guard: results given to the model, calls it proposes."""

    results: list[tuple[str, OutcomeDigest]]
    calls: list[tuple[ProposedCall, str | None]]


class LoopGuardCompletionHook:
    """A completion hook for ``opentelemetry-util-genai``: every guard whose processor sees the
    response's span judges its tool calls (see the module). ``next_hook``: called after."""

    def __init__(self, next_hook: _Hook | None = None) -> None:
        self._next = next_hook
        self._last: weakref.ref[Runtime] | None = None
        self._proposals = Proposals()

    def on_completion(
        self,
        *,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        system_instruction: Sequence[Any] = (),
        tool_definitions: Sequence[Any] | None = None,
        span: trace.Span | None = None,
        log_record: Any = None,
    ) -> None:
        if span is not None:
            runtime = self._runtime_of(span)
            if runtime is not None:
                _answered(runtime, self._judge, runtime, span, inputs, outputs)
        if self._next is not None:
            self._next.on_completion(
                inputs=inputs,
                outputs=outputs,
                system_instruction=system_instruction,
                tool_definitions=tool_definitions,
                span=span,
                log_record=log_record,
            )

    def _runtime_of(self, span: trace.Span) -> Runtime | None:
        """The guard that sees this span: the one that saw the last, usually."""
        last = self._last() if self._last is not None else None
        if last is not None and last.sees(span):
            return last
        found = runtime_of(span)
        self._last = None if found is None else weakref.ref(found)
        return found

    def _judge(
        self, runtime: Runtime, span: trace.Span, inputs: Sequence[Any], outputs: Sequence[Any]
    ) -> None:
        live = runtime.entry_of(span)
        operation = reader.READER.attributes(span).get("gen_ai.operation.name")
        if live is None or operation not in _INFERENCE:
            return
        cfg = runtime.settings.for_agent(live.agent)
        if not cfg.active:
            return
        proposals = self._proposals.of(live.scope_key)
        response = span.get_span_context().span_id
        seen = _Seen(
            self._results(proposals, inputs, cfg),
            self._proposed(proposals, response, runtime, outputs, cfg),
        )
        if not seen.results and not seen.calls:
            return
        fired, judged = runtime.store.update(
            live.scope_key, _completion, seen, cfg, span.is_recording()
        )
        self._annotate(runtime, span, live, fired, judged, cfg)

    @staticmethod
    def _results(
        proposals: ScopeProposals, inputs: Sequence[Any], cfg: ResolvedConfig
    ) -> list[tuple[str, OutcomeDigest]]:
        """The tool results the request gives the model since its last response, digested."""
        found = []
        for call_id, response in _responses(inputs):
            call = proposals.call(call_id) or _UNKNOWN_CALL
            found.append((call_id, digest_outcome(call, response, None, cfg)))
        return found

    @staticmethod
    def _proposed(
        proposals: ScopeProposals,
        response: int,
        runtime: Runtime,
        outputs: Sequence[Any],
        cfg: ResolvedConfig,
    ) -> list[tuple[ProposedCall, str | None]]:
        """The calls a response proposes, digested; a call id this response proposed already
        (the same response given to the hook twice) is not counted again. Another response of
        the scope may reuse an id (some models number their calls per request: ``call_0``)."""
        calls = []
        for name, arguments, call_id in _tool_calls(outputs):
            if call_id is not None and proposals.seen(call_id, response):
                continue
            call = runtime.digest.call(name, arguments, cfg)
            calls.append((call, call_id))
            if call_id is not None:
                proposals.add(call_id, call, response)
        return calls

    @staticmethod
    def _annotate(
        runtime: Runtime,
        span: trace.Span,
        live: LiveSpan,
        fired: list[Verdict],
        judged: list[tuple[ProposedCall, Decision]],
        cfg: ResolvedConfig,
    ) -> None:
        """The detections on the response's span (still open), logged and counted once."""
        marks = [
            mark
            for call, decision in judged
            if (mark := mark_of(decision, call.tool, runtime.currency)) is not None
        ]
        for verdict in fired:  # the post-compaction guard, as a result arrived
            intended = verdict if cfg.observe_only else None
            shown = replace(verdict, action="warn") if intended else verdict
            marks.append(Mark(shown, verdict.tool_name or "", intended))
        context = span.get_span_context()
        for mark in marks:
            if span.is_recording():
                runtime.annotator.on_live_span(span, mark)
            elif mark.signal:
                runtime.annotator.signal(mark, context)
            if mark.signal and mark.verdict.aborted:
                runtime.fail_run(live, context.trace_id, mark.verdict)


_UNKNOWN_CALL = ProposedCall(tool="", args_fp=0)
"""How a result is read when this process did not see its call proposed: plainly."""


def _completion(
    state: ScopeState, seen: _Seen, cfg: ResolvedConfig, shown: bool
) -> tuple[list[Verdict], list[tuple[ProposedCall, Decision]]]:
    """One model response on its scope's state: the outcomes of earlier calls, by call id, then
    its calls admitted as a batch (``shown``: the detections go on the response's span). State
    changes only."""
    fired = [
        verdict
        for call_id, result in seen.results
        if (verdict := state.result_of_call(call_id, result, cfg)) is not None
    ]
    decisions = state.ask_batch(seen.calls, cfg, shown=shown) if seen.calls else []
    return fired, list(zip((call for call, _ in seen.calls), decisions, strict=True))


def _responses(inputs: Sequence[Any]) -> Iterable[tuple[str, object]]:
    """(call id, response) of the tool results after the model's last response in a request:
    the earlier ones were seen with the requests before it."""
    tail: list[tuple[str, object]] = []
    for message in reversed(inputs):
        if getattr(message, "role", None) == "assistant":
            break
        for part in getattr(message, "parts", None) or ():
            call_id = getattr(part, "id", None)
            if getattr(part, "type", None) == "tool_call_response" and isinstance(call_id, str):
                tail.append((bounded(call_id), getattr(part, "response", None)))
    return reversed(tail)


def _tool_calls(outputs: Sequence[Any]) -> Iterable[tuple[str, object, str | None]]:
    """(name, arguments, call id) of the tool calls a model response proposes."""
    for message in outputs:
        for part in getattr(message, "parts", None) or ():
            name = getattr(part, "name", None)
            if getattr(part, "type", None) == "tool_call" and isinstance(name, str) and name:
                call_id = getattr(part, "id", None)
                yield (
                    bounded(name),  # as a span's tool name is: kept, shown, and shared
                    getattr(part, "arguments", None),
                    # Bounded as a span's call id is (the span's call is found by it).
                    (bounded(call_id) if isinstance(call_id, str) and call_id else None),
                )


def _answered(runtime: Runtime, fn: Any, *args: Any) -> None:
    """``fn(*args)``; an internal error is logged once per kind (re-raised in strict mode)."""
    try:
        fn(*args)
    except Exception as exc:
        runtime.errors.report("completion_hook", exc)


def completion_hook() -> LoopGuardCompletionHook:
    """The entry point's factory (``opentelemetry_genai_completion_hook``: ``loopguard``),
    chaining to the hook ``OTEL_LOOPGUARD_NEXT_COMPLETION_HOOK`` names, if any."""
    return LoopGuardCompletionHook(next_hook=_next_hook(os.environ.get(ENV_NEXT_COMPLETION_HOOK)))


def _next_hook(name: str | None) -> _Hook | None:
    name = (name or "").strip()
    if not name or name == HOOK_NAME:
        return None
    try:
        from opentelemetry.util.genai import completion_hook as genai  # optional: util-genai's
    except ImportError:
        _logger.warning(
            "%s=%s: opentelemetry-util-genai is not installed; only loopguard's hook runs",
            ENV_NEXT_COMPLETION_HOOK,
            name,
        )
        return None
    previous = os.environ.get(ENV_COMPLETION_HOOK)
    os.environ[ENV_COMPLETION_HOOK] = name
    try:
        hook: _Hook = genai.load_completion_hook()
    finally:
        if previous is None:
            del os.environ[ENV_COMPLETION_HOOK]
        else:
            os.environ[ENV_COMPLETION_HOOK] = previous
    return hook
