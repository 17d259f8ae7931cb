"""What otel-loopguard added to a tool's result for the model, taken out before it is digested.

A warning reaches the model inside the tool's result: ``@guard.tool`` and the adapters append
it to text (after :data:`SEPARATOR`) or put it under :data:`WARNING_KEY` in a mapping. An
instrumentation may record the result after that, as it was returned, as JSON text (the
message JSON-escaped), or wrapped (``{"result": ...}``, ``[{"text": ...}]``). If the warning
stayed in, the next identical call would not look identical and the loop would never be
blocked. So the message issued for the call is removed by exact match, in each of the forms a
recording can hold it; nothing is guessed from the shape of the text.
"""

from __future__ import annotations

import functools
import json
import re

from ...config.settings import WARNING_KEY
from ..messages import MAX_SEARCH_CHARS, TAG
from .jsontext import MAX_DEPTH

__all__ = ["SEPARATOR", "WARNING_KEY", "may_carry", "without_message"]

SEPARATOR = "\n\n"
"""What ``@guard.tool`` and the adapters put between a text result and the warning."""

_MAX_SEPARATOR = 16
"""At most this many characters of whitespace before a message are taken with it."""
_RAW_SPACE = frozenset(" \t\r\n")
_ESCAPED_SPACE = ("\\n", "\\r", "\\t")


def may_carry(result: object) -> bool:
    """Whether a recorded result may hold a message of ours: a constant-time test on the end
    of a text (every message ends with the tag, appended at the end of the result)."""
    if isinstance(result, str):
        return TAG in result[-MAX_SEARCH_CHARS:]
    return isinstance(result, dict | list | tuple)


def without_message(result: object, message: str) -> object:
    """``result`` without ``message``, wherever the guard or an instrumentation put it: in a
    text as written or JSON-escaped (with the whitespace before it), as a whole
    :data:`WARNING_KEY` member of a mapping or of JSON text, in the strings of a structured
    value."""
    if isinstance(result, str) and TAG not in result[-MAX_SEARCH_CHARS:]:
        return result  # the usual result: no message of ours at all
    return _without(result, _forms(message), 0)


class _Forms:
    """The message as each recording may hold it: as written, and JSON-escaped (ASCII or not);
    the patterns of its :data:`WARNING_KEY` member are compiled when a text first needs them."""

    __slots__ = ("_members", "all", "escaped", "message")

    def __init__(self, message: str) -> None:
        self.message = message
        self.escaped = sorted(
            {
                json.dumps(message, ensure_ascii=False)[1:-1],
                json.dumps(message, ensure_ascii=True)[1:-1],
            },
            key=len,
            reverse=True,
        )
        self.all = [message, *(form for form in self.escaped if form != message)]
        self._members: list[re.Pattern[str]] | None = None

    @property
    def members(self) -> list[re.Pattern[str]]:
        """The member as a JSON writer puts it: before or after the object's other members."""
        if self._members is None:
            key = re.escape(json.dumps(WARNING_KEY))
            self._members = [
                re.compile(
                    rf"(?:,\s{{0,8}}{key}\s{{0,8}}:\s{{0,8}}\"{re.escape(form)}\""
                    rf"|{key}\s{{0,8}}:\s{{0,8}}\"{re.escape(form)}\"\s{{0,8}},?\s{{0,8}})"
                )
                for form in self.escaped
            ]
        return self._members


@functools.lru_cache(maxsize=256)
def _forms(message: str) -> _Forms:
    """The forms of a message (a guard issues few distinct messages, and each again and again:
    a result is stripped of the message its call was given at every outcome of a loop)."""
    return _Forms(message)


def _without(value: object, forms: _Forms, depth: int) -> object:
    if isinstance(value, str):
        return _text_without(value, forms)
    if depth >= MAX_DEPTH:
        return value
    if type(value) is dict:
        return {
            key: _without(item, forms, depth + 1)
            for key, item in value.items()
            if not (key == WARNING_KEY and item == forms.message)
        }
    if isinstance(value, list | tuple):
        return [_without(item, forms, depth + 1) for item in value]
    return value


def _text_without(text: str, forms: _Forms) -> str:
    origin = max(0, len(text) - MAX_SEARCH_CHARS)
    if TAG not in text[origin:]:
        return text  # the usual result: no message of ours at all
    for member in forms.members:
        text = text[:origin] + member.sub("", text[origin:])
    for form in forms.all:
        text = _cut(text, form, origin)
    return text


def _cut(text: str, form: str, origin: int) -> str:
    """``text`` without each ``form`` found after ``origin``, with the whitespace that
    separates it from what comes before: as written, or else escaped as in JSON (the message
    inside a JSON string)."""
    found = text.find(form, origin)
    if found < 0:
        return text
    pieces: list[str] = []
    kept = 0
    while found >= 0:
        low = max(kept, found - _MAX_SEPARATOR)
        start = found
        while start > low and text[start - 1] in _RAW_SPACE:
            start -= 1
        if start == found:
            while start - 2 >= low and text[start - 2 : start] in _ESCAPED_SPACE:
                start -= 2
        pieces.append(text[kept:start])
        kept = found + len(form)
        found = text.find(form, kept)
    pieces.append(text[kept:])
    return "".join(pieces)
