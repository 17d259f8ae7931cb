"""mini-swe-agent and SWE-agent trajectories read as runs: one file, one run.

mini-swe-agent (``<instance>.traj.json``): each assistant message is a model call, its usage and
cost those of the model response it keeps (``extra.response.usage``); the one ```` ```bash ````
block of a reply is a call of the tool ``bash`` with ``{"command": ...}``, its outcome the next
message's text exactly (a ``<returncode>`` other than 0 makes it a failure). A reply with no
block or with several is what mini-swe-agent rejects for its format: a model call that called
no tool.

SWE-agent 0.x (``<instance>.traj``): each step of ``trajectory`` is a model call and the action
it ran. A command of SWE-agent's own interface is the tool named by its first word (``open``,
``edit``, ``submit``...), anything else ``bash``; the arguments are ``{"command": ACTION}``, the
outcome the observation exactly (an ``edit`` its linter rejected is a failure). SWE-agent keeps
only the run's totals (``info.model_stats``): they are apportioned over the steps, input by the
length of the conversation each was sent, output by the length of its reply (docs/replay.md).
docs/replay.md gives the mapping in full.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..engine.replay import Call
from .agent_logs import (
    AgentLogError,
    OutOfRange,
    as_float,
    as_int,
    new_run,
    read_document,
    spent,
    stem,
    text_of,
    tool_span,
)
from .runs import RecordedCall, RecordedRun

_RETURN_CODE = re.compile(r"<returncode>(-?\d{1,6})</returncode>")

SWE_AGENT_COMMANDS = frozenset(
    {
        "open",
        "goto",
        "scroll_down",
        "scroll_up",
        "create",
        "edit",
        "submit",
        "search_file",
        "search_dir",
        "find_file",
    }
)
"""SWE-agent 0.x's own commands (its default interface): each its own tool."""
_EXITS = frozenset({"exit_cost", "exit_context", "exit_api", "exit_format", "exit_error"})
"""Steps SWE-agent writes itself as it stops a run (its cost limit...): no model call made them."""
_LINT_REJECTED = "Your proposed edit has introduced new syntax error"
_MAX_STATS_CHARS = 4_096
"""``model_stats`` written as a Python dict's text: longer is not read (not parsed at all)."""


def mini_swe_agent_actions(text: str) -> list[str]:
    """What mini-swe-agent's own ``action_regex``, ``r"```bash\\s*\\n(.*?)\\n```"`` with
    ``re.DOTALL``, finds in a reply (it must find exactly one block), found in time linear in
    the reply's length: the pattern, matched by backtracking, takes time quadratic in a reply
    that opens a block with a run of blank lines and never closes it."""
    actions: list[str] = []
    closes = _Closes(text)
    start = text.find(_OPEN)
    while start >= 0:
        after = start + len(_OPEN)
        spaces = _SPACES.match(text, after)
        end = spaces.end() if spaces is not None else after
        # ``\s*\n`` takes the last newline of the blank run whose block is closed later...
        newline = text.rfind("\n", after, end)
        close = closes.first_from(newline + 1) if newline >= 0 else -1
        if close < 0 and newline == end - 1 and text.startswith("```", end):
            # ...or, where none is, the newline before it: the run's last one closes the block.
            close, newline = newline, text.rfind("\n", after, newline)
        if newline >= 0 and close >= 0:
            actions.append(text[newline + 1 : close])
            start = text.find(_OPEN, close + len(_CLOSE))
        else:
            start = text.find(_OPEN, start + 1)
    return actions


_OPEN = "```bash"
_CLOSE = "\n```"
_SPACES = re.compile(r"\s*")


class _Closes:
    """Where the next block closes, from ever later places in one text: each found once."""

    __slots__ = ("_found", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._found = -2  # none looked for yet

    def first_from(self, place: int) -> int:
        """The first close at or after ``place`` (-1: none); ``place`` never goes back."""
        if self._found == -2 or (self._found != -1 and self._found < place):
            self._found = self._text.find(_CLOSE, place)
        return self._found


def read_mini_swe_agent(path: str, prices: Mapping[str, tuple[float, float, float]]) -> RecordedRun:
    """The run in a mini-swe-agent trajectory file."""
    document = read_document(path, "mini-swe-agent trajectory")
    messages = document.get("messages")
    if not isinstance(messages, list):
        raise AgentLogError(f"{path}: not a mini-swe-agent trajectory: no 'messages' list")
    instance = document.get("instance_id")
    key = instance if isinstance(instance, str) and instance else stem(path, ".traj.json")
    run = new_run(key, "mini-swe-agent", None)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise AgentLogError(f"{path}: message {index} is not an object")
        if message.get("role") != "assistant":
            continue
        try:
            _reply(run, prices, messages, index, message)
        except OutOfRange as exc:
            raise AgentLogError(f"{path}: message {index}: {exc}") from None
    return run


def _reply(
    run: RecordedRun,
    prices: Mapping[str, tuple[float, float, float]],
    messages: list[Any],
    index: int,
    message: dict[str, Any],
) -> None:
    """A mini-swe-agent reply: its model call, and the command it ran (if it ran one)."""
    text = text_of(message.get("content"))
    response = _member(_member(message, "extra"), "response")
    usage = _member(response, "usage")
    model = response.get("model")
    model = model if isinstance(model, str) else None
    run.service = run.service or model
    actions = mini_swe_agent_actions(text)
    created = as_float(response.get("created"), "created")
    cached = _member(usage, "prompt_tokens_details").get("cached_tokens")
    run.items.append(
        spent(
            prices,
            input_tokens=as_int(usage.get("prompt_tokens"), "prompt_tokens"),
            output_tokens=as_int(usage.get("completion_tokens"), "completion_tokens"),
            cached=as_int(cached, "cached_tokens"),
            model=model,
            cost=as_float(usage.get("cost"), "cost"),
            when=created or 0.0,
            tool_calls=1 if len(actions) == 1 else 0,
            rejected=len(actions) != 1,
        )
    )
    if len(actions) != 1:
        return  # rejected for its format: no command ran
    observation = _observation(messages, index + 1)
    error = None
    if observation is not None:
        code = _RETURN_CODE.match(observation)
        error = observation if code is not None and int(code.group(1)) != 0 else None
    call = Call("bash", {"command": actions[0]}, observation, error)
    run.items.append(RecordedCall(call, tool_span("bash"), None))


def read_swe_agent(path: str, prices: Mapping[str, tuple[float, float, float]]) -> RecordedRun:
    """The run in a SWE-agent trajectory file, keyed by the file's name (its instance)."""
    document = read_document(path, "SWE-agent trajectory")
    steps = document.get("trajectory")
    if not isinstance(steps, list):
        raise AgentLogError(f"{path}: not a SWE-agent trajectory: no 'trajectory' list")
    for index, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            raise AgentLogError(f"{path}: trajectory step {index} has no 'action' text")
    made = [step for step in steps if step["action"].strip() not in _EXITS]
    stats = _model_stats(path, _member(document, "info").get("model_stats"))
    history = document.get("history")
    prompt = _prompt_chars(history if isinstance(history, list) else [])
    sent_weights, received_weights = [], []
    for step in made:
        reply = text_of(step.get("response")) or step["action"]
        sent_weights.append(prompt)
        received_weights.append(len(reply))
        prompt += len(reply) + len(text_of(step.get("observation")))
    try:
        sent = _apportion(as_int(stats.get("tokens_sent"), "tokens_sent"), sent_weights)
        received = _apportion(
            as_int(stats.get("tokens_received"), "tokens_received"), received_weights
        )
        cost = as_float(stats.get("instance_cost"), "instance_cost")
    except OutOfRange as exc:
        raise AgentLogError(f"{path}: info.model_stats: {exc}") from None
    total = sum(sent) + sum(received)
    run = new_run(stem(path, ".traj"), "SWE-agent", None)
    for step, tokens_in, tokens_out in zip(made, sent, received, strict=True):
        action: str = step["action"]
        words = action.split(maxsplit=1)
        share = (
            None if cost is None else (cost * (tokens_in + tokens_out) / total if total else 0.0)
        )
        run.items.append(
            spent(
                prices,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                cost=share,
                tool_calls=1 if words else 0,
                rejected=not words,
            )
        )
        if not words:
            continue  # an empty action: nothing ran
        tool = words[0] if words[0] in SWE_AGENT_COMMANDS else "bash"
        observation = step.get("observation")
        result = observation if isinstance(observation, str) else None
        rejected = tool == "edit" and result is not None and result.startswith(_LINT_REJECTED)
        call = Call(tool, {"command": action}, result, result if rejected else None)
        run.items.append(RecordedCall(call, tool_span(tool), None))
    return run


def _apportion(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights``, in whole tokens that sum to it exactly
    (each share the difference of two rounded running totals); evenly if no weight is set."""
    if not weights:
        return []
    weights = weights if sum(weights) > 0 else [1] * len(weights)
    whole = sum(weights)
    shares, running, given = [], 0, 0
    for weight in weights:
        running += weight
        upto = (total * running + whole // 2) // whole
        shares.append(upto - given)
        given = upto
    return shares


def _prompt_chars(history: list[Any]) -> int:
    """The length of what the first model call was sent: the history before its first reply."""
    chars = 0
    for message in history:
        if not isinstance(message, dict) or message.get("role") == "assistant":
            break
        chars += len(text_of(message.get("content")))
    return chars


def _model_stats(path: str, stats: object) -> dict[str, Any]:
    """``info.model_stats``: a JSON object, or (as SWE-agent 0.x writes it) a Python dict's text."""
    if isinstance(stats, dict):
        return stats
    if isinstance(stats, str) and len(stats) <= _MAX_STATS_CHARS:
        try:
            parsed = ast.literal_eval(stats)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    if stats is None:
        return {}
    raise AgentLogError(f"{path}: 'info.model_stats' is neither an object nor a dict's text")


def _observation(messages: list[Any], index: int) -> str | None:
    """The text of the message that answered a command (``None``: the trajectory ends first)."""
    if index >= len(messages):
        return None
    message = messages[index]
    if not isinstance(message, dict) or message.get("role") == "assistant":
        return None
    return text_of(message.get("content"))


def _member(parent: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = parent.get(name)
    return value if isinstance(value, dict) else {}
