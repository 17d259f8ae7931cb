"""The completion hook is found by its entry point's name, and calls a hook named after it."""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.completion_hook import HOOK_NAME, LoopGuardCompletionHook, completion_hook

pytest.importorskip(
    "opentelemetry.util.genai", reason="opentelemetry-util-genai needs opentelemetry-api>=1.43"
)


def test_the_hook_is_found_by_its_entry_point_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.util.genai.completion_hook import load_completion_hook

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", HOOK_NAME)
    loaded = load_completion_hook()
    assert isinstance(getattr(loaded, "_wrapped", loaded), LoopGuardCompletionHook)


def test_another_hook_named_next_is_called_after_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Recorder:
        def on_completion(self, **kwargs: Any) -> None:
            calls.append("next")

    monkeypatch.setattr("otel_loopguard.completion_hook._next_hook", lambda name: Recorder())
    monkeypatch.setenv("OTEL_LOOPGUARD_NEXT_COMPLETION_HOOK", "upload")
    hook = completion_hook()
    hook.on_completion(inputs=[], outputs=[], system_instruction=[])
    assert calls == ["next"]
