"""AutoGen AgentChat: check each tool call in the workbench; stop the model once the guard aborts.

Three things keep the documented ways (``@guard.tool``, ``guard.check()`` in the tool) from
ending an AgentChat 0.7 run: a tool's exception becomes an error result the model answers; an
exception out of a workbench leaves ``AssistantAgent`` waiting forever (its tool calls run in a
task whose failure is never awaited); and a sync function tool runs in a thread pool without the
caller's context, so its spans start traces of their own. Here the workbench runs each call as a
``@guard.tool`` in the event loop (its own ``execute_tool`` span, checked before the call runs;
the run's trace is the scope), and answers a blocked call with the block message as an error
result; the model client raises ``ToolLoopBlocked`` (or ``CompactionLoopPersisted``) instead of
asking the model again once the guard has aborted the run, which ends ``agent.run``::

    agent = AssistantAgent(
        "assistant",
        model_client=guarded_model_client(guard, model_client),
        workbench=guarded_workbench(guard, [read_file]),
        max_tool_iterations=100,
    )
    try:
        await agent.run(task=task)
    except ToolLoopBlocked as stop:
        print(stop.verdict.detector)

The run's trace is the scope: instrument with ``AutogenAgentChatInstrumentor`` (OpenInference),
use AutoGen's own tracing (its ``invoke_agent`` span, on the global tracer provider), or run the
agent inside a span of your own. The guard's span of each call sits in an instrumentation's tool
span, and counts once with it. Without any of these, each call is a trace of its own: no loop.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal

from autogen_core import CancellationToken
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,  # deprecated, still abstract
    ModelInfo,
    RequestUsage,
)
from autogen_core.tools import (
    BaseTool,
    StaticWorkbench,
    TextResultContent,
    Tool,
    ToolResult,
    ToolSchema,
    Workbench,
)
from pydantic import BaseModel

from .. import LoopGuard
from ._kit import OK, exception_for

__all__ = ["GuardedModelClient", "GuardedWorkbench", "guarded_model_client", "guarded_workbench"]


class GuardedWorkbench(Workbench):
    """A workbench whose calls ``guard`` checks before they reach ``workbench``.

    Each call runs in the guard's ``execute_tool`` span. A blocked call (or an aborted run's)
    does not run: its result is the block message, as an error; a warning is added to the
    result (``warningsToModel``). Never raises a verdict: AgentChat would wait forever for the
    tool calls' task.
    """

    def __init__(self, guard: LoopGuard, workbench: Workbench) -> None:
        self.guard = guard
        self.workbench = workbench
        self._warn = guard.settings.for_agent(None).warnings_to_model

    async def list_tools(self) -> list[ToolSchema]:
        return await self.workbench.list_tools()

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        verdict = OK

        async def call(**kwargs: Any) -> ToolResult:
            # In the guard's execute_tool span of this call (arguments at its start, result at
            # its end): the guard sees the call's outcome, with or without an instrumentation.
            nonlocal verdict
            verdict = self.guard.check()  # the span's own verdict: no second evaluation
            return await self.workbench.call_tool(name, kwargs, cancellation_token, call_id)

        result = await self.guard.tool(name=name)(call)(**dict(arguments or {}))
        if not isinstance(result, ToolResult):
            # Blocked (or the run aborted): the tool did not run; the message tells the model.
            content = [TextResultContent(content=str(result))]
            return ToolResult(name=name, result=content, is_error=True)
        if self._warn and verdict.level == "warning":
            # Added after the span recorded the result: a warning is no change of outcome.
            warning = TextResultContent(content=verdict.message)
            return result.model_copy(update={"result": [*result.result, warning]})
        return result

    async def start(self) -> None:
        await self.workbench.start()

    async def stop(self) -> None:
        await self.workbench.stop()

    async def reset(self) -> None:
        await self.workbench.reset()

    async def save_state(self) -> Mapping[str, Any]:
        return await self.workbench.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self.workbench.load_state(state)


def guarded_workbench(
    guard: LoopGuard, tools: Workbench | Sequence[BaseTool[Any, Any]]
) -> GuardedWorkbench:
    """``AssistantAgent(workbench=...)``: ``tools`` (a workbench, or tools for a
    ``StaticWorkbench``) with every call checked by ``guard`` first."""
    workbench = tools if isinstance(tools, Workbench) else StaticWorkbench(list(tools))
    return GuardedWorkbench(guard, workbench)


class GuardedModelClient(ChatCompletionClient):
    """A model client that raises the guard's abort instead of asking ``client`` again.

    Asked inside the agent's run (the instrumentation's agent span is current): the run's scope.
    """

    def __init__(self, guard: LoopGuard, client: ChatCompletionClient) -> None:
        self.guard = guard
        self.client = client

    def _stop_if_aborted(self) -> None:
        verdict = self.guard.abort_verdict()
        if verdict is not None:
            raise exception_for(verdict)

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},  # the interface's default
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        self._stop_if_aborted()
        return await self.client.create(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},  # the interface's default
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        self._stop_if_aborted()
        async for chunk in self.client.create_stream(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        ):
            yield chunk

    async def close(self) -> None:
        await self.client.close()

    def actual_usage(self) -> RequestUsage:
        return self.client.actual_usage()

    def total_usage(self) -> RequestUsage:
        return self.client.total_usage()

    def count_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()
    ) -> int:
        return self.client.count_tokens(messages, tools=tools)

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()
    ) -> int:
        return self.client.remaining_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> ModelCapabilities:
        return self.client.capabilities

    @property
    def model_info(self) -> ModelInfo:
        return self.client.model_info


def guarded_model_client(guard: LoopGuard, client: ChatCompletionClient) -> GuardedModelClient:
    """``AssistantAgent(model_client=...)``: ``client``, refusing to run once ``guard`` has
    aborted the run (it raises ``ToolLoopBlocked`` or ``CompactionLoopPersisted``)."""
    return GuardedModelClient(guard, client)
