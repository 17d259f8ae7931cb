"""Python reprs of plain data, parsed only when their shape keeps the parser's stack small.

OpenInference's LangChain instrumentation records a tool's inputs as the ``repr`` of a dict.
``ast.literal_eval`` reads them, but Python's parser recurses in C for every level of an
expression, and no recursion limit stops it: 6,000 minus signs in a row crash the interpreter on
a thread with a 512 KiB stack. So a text is parsed only if one linear scan finds nothing but what
a repr of dicts, lists, tuples and sets of str, bytes, int, float, bool and None is made of:
quoted strings, numbers with at most one sign, ``True``, ``False``, ``None`` and ``{}[](),:``,
each value followed by punctuation, brackets at most :data:`MAX_DEPTH` deep. Names, operators,
attribute chains, calls and runs of signs are no such repr: they are not parsed.
"""

from __future__ import annotations

import ast
import re

MAX_CHARS = 65_536
"""Longer texts are not parsed (the scan and the parser each take time linear in the length)."""

MAX_DEPTH = 32
"""Deeper brackets are not parsed. The parser takes about 1.3 KiB of C stack per level here, so
32 levels fit in a thread stack of 64 KiB, the smallest a host is likely to set."""

_TOKEN = re.compile(
    r"""[ \t\r\n]*+(?:
        (?P<value>
            [bB]?(?:'[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'|"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+")
            |[-+]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][-+]?\d++)?
            |(?:True|False|None)\b
        )
        |(?P<open>[\[({])
        |(?P<close>[\])}])
        |(?P<separator>[,:])
    )""",
    re.VERBOSE | re.ASCII,
)
"""One token. Each alternative starts with characters no other one starts with, and every
repetition is possessive: a match never backtracks, so the scan is linear."""

_END = re.compile(r"[ \t\r\n]*\Z")


def literal(text: str) -> object:
    """The value of a Python repr of plain data.

    Raises ``ValueError`` when ``text`` is no such repr, is longer than :data:`MAX_CHARS` or
    nests deeper than :data:`MAX_DEPTH`.
    """
    if len(text) > MAX_CHARS:
        raise ValueError("not parsed: too long")
    _screen(text)
    try:
        return ast.literal_eval(text)
    except (SyntaxError, TypeError, MemoryError, RecursionError) as error:
        raise ValueError("not parsed: no repr of plain data") from error


def _screen(text: str) -> None:
    """Raise ``ValueError`` unless ``text`` is made only of a plain-data repr's tokens."""
    depth = 0
    after_value = False  # a value or a closing bracket: what follows must close or separate
    position = 0
    match = _TOKEN.match
    token = match(text, position)
    while token is not None:
        kind = token.lastgroup
        if kind == "open":
            depth += 1
            if after_value or depth > MAX_DEPTH:
                raise ValueError("not parsed: a call, a subscript or too deep")
        elif kind == "close":
            depth -= 1
            if depth < 0:
                raise ValueError("not parsed: a bracket closed before it opened")
            after_value = True
        elif kind == "value":
            if after_value:
                raise ValueError("not parsed: two values in a row (an operator?)")
            after_value = True
        else:
            after_value = False
        position = token.end()
        token = match(text, position)
    if depth != 0 or _END.match(text, position) is None:
        raise ValueError("not parsed: no repr of plain data")
