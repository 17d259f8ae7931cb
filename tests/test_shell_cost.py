"""Host safety, bounded cost: every regular expression and scanner that reads a call's command
or an outcome's text (engine/identity/shell.py) costs time linear in what it reads, whatever
the text. A model's command or a tool's output is untrusted: a pattern that backtracks over a
crafted text, or a scan started again from each quote it passes, would let one call hold the
host's thread for seconds (a run of 4 096 digits once took 1.5 s to blank).

Each case is timed on a 64 KiB adversarial text, the fastest of several runs taken in turn
with the text it is compared with, in the CPU time of this process (``time.process_time``:
on a busy host, a wall clock's ``perf_counter`` counts the time other processes ran too, and
made a linear scan look eleven times as slow on four times the text), against:

- the same text cut to 16 KiB: a linear scan costs four times as much on four times the
  text, a quadratic one sixteen times; more than eight fails;
- an ordinary text of the same length (a command, an output, a shape as this module sees
  them; as dense with what the scan looks for as the adversarial one, where that is dense:
  ``Case.ordinary``): the adversarial one may cost at most five times as much.

The quote scans are also counted, not timed: the characters ``str.find`` reads for them,
which the C speed of ``find`` would hide in a timing at 64 KiB.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import NamedTuple, SupportsIndex

import pytest

from otel_loopguard.engine.identity import shell

SIZE = 64 * 1024
SMALL = 16 * 1024
REPEATS = 7

Scan = Callable[[str], object]


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _fastest(scan: Scan, one: str, other: str, repeats: int = REPEATS) -> tuple[float, float]:
    """The fastest run of ``scan`` over each text, the two timed in turn."""
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        for index, text in enumerate((one, other)):
            start = time.process_time()
            scan(text)
            best[index] = min(best[index], time.process_time() - start)
    return best[0], best[1]


COMMAND = (
    "cd /repo && sed -i '1830i\\    print(\"DEBUG: a=1\")' django/db/models/query.py && "
    "python -m pytest tests/test_api_v12.py -q -k 'not slow' 2>&1 | tail -n 40\n"
    "cat <<'EOF' > t.py\nimport os\nprint(os.getpid(), 0x1f)\nEOF\npython3 t.py\n"
)
"""An ordinary command: quoted scripts, a heredoc, numbers, a redirection."""
READ_ONLY = (
    "cd /repo && python -m pytest tests/test_api_v12.py -q -k 'not slow' 2>&1 | tail -n 40\n"
)
"""An ordinary command that writes no file (``_EDIT_COMMAND`` scans it to its end)."""
OUTPUT = (
    "tests/test_api.py::test_case_12 PASSED                                  [ 12%]\n"
    "Ran 83 tests in 0.218s at 10:11:12 (pid 4242)\nFAILED (failures=1)\n"
)
"""An ordinary test run's output: counts, times, a pid."""
SHAPE = "sed -n \u00ab#,#p\u00bb f.py | grep -n \u00abdef x\u00bb a.py | head -n # && "
"""An ordinary shape: quoted words written one way, numbers blanked."""


def _sub(pattern: re.Pattern[str], repl: str) -> Scan:
    return lambda text: pattern.sub(repl, text)


def _finds(pattern: re.Pattern[str]) -> Scan:
    return lambda text: pattern.findall(text)


def _search(pattern: re.Pattern[str]) -> Scan:
    return lambda text: pattern.search(text)


class Case(NamedTuple):
    scan: Scan
    adversarial: Callable[[int], str]
    """The adversarial text of a given length."""
    ordinary: str
    """An ordinary text's unit (filled to the length): a command, an output, a shape as this
    module sees them; where the adversarial text is dense with what the scan looks for (a
    mark, a digit at every other character), an ordinary text as dense with it, so that the
    comparison is of the way the scan reads, not of how much there is to read."""


CASES: dict[str, Case] = {
    # _HEREDOC: a mark at every other character; white space after a mark; unclosed quotes.
    "heredoc-marks": Case(
        _finds(shell._HEREDOC),
        lambda n: _fill("<<", n),
        "x <<EOF\n",
    ),
    "heredoc-blanks": Case(
        _finds(shell._HEREDOC),
        lambda n: ("<<-" + " \t" * n)[:n],
        "cat <<- EOF\n",
    ),
    "heredoc-unclosed": Case(
        _finds(shell._HEREDOC),
        lambda n: _fill("<<'a", n),
        "cat <<'EOF' > f.py\n",
    ),
    # _NUMBER: one run of digits; digits and blanks; hexadecimal prefixes; digits in names.
    "number-run": Case(_sub(shell._NUMBER, "#"), lambda n: "9" * n, COMMAND),
    "number-many": Case(
        _sub(shell._NUMBER, "#"),
        lambda n: _fill("1 ", n),
        "line 10: 42 ",
    ),
    "number-hex": Case(_sub(shell._NUMBER, "#"), lambda n: "0x" + "f" * (n - 2), COMMAND),
    "number-prefixes": Case(_sub(shell._NUMBER, "#"), lambda n: _fill("0x", n), COMMAND),
    "number-names": Case(
        _sub(shell._NUMBER, "#"),
        lambda n: _fill("a1", n),
        "v1 v2 ",
    ),
    # _SED_ADDRESS: addresses as long as it reads, ranges left open, a quote and then digits.
    "sed-address": Case(
        _sub(shell._SED_ADDRESS, r"\1#"), lambda n: _fill("'123456789,123456789 ", n), COMMAND
    ),
    "sed-address-open": Case(_sub(shell._SED_ADDRESS, r"\1#"), lambda n: _fill("'1,", n), COMMAND),
    "sed-address-digits": Case(
        _sub(shell._SED_ADDRESS, r"\1#"), lambda n: "'" + "1" * (n - 1), COMMAND
    ),
    # _EDIT_LINES: SWE-agent's edit with its colon and no second number; numbers at the bound.
    "edit-lines": Case(
        _sub(shell._EDIT_LINES, "edit #"),
        lambda n: _fill("edit 1:", n),
        "edit 10:12\n",
    ),
    "edit-lines-long": Case(
        _sub(shell._EDIT_LINES, "edit #"),
        lambda n: _fill("edit 123456789:123456789x", n),
        "edit 123:456\nfoo = 1\n",
    ),
    # _EDIT_COMMAND: sed -a -a -a ... with no -i; a long flag; '>'-heavy text with dots.
    "edit-command-flags": Case(
        _search(shell._EDIT_COMMAND), lambda n: "sed " + _fill("-a ", n - 4), READ_ONLY
    ),
    "edit-command-many-seds": Case(
        _search(shell._EDIT_COMMAND), lambda n: _fill("(sed -a -a -a -a ", n), READ_ONLY
    ),
    "edit-command-long-flag": Case(
        _search(shell._EDIT_COMMAND), lambda n: "sed -" + "a" * (n - 5), READ_ONLY
    ),
    "edit-command-redirections": Case(
        _search(shell._EDIT_COMMAND),
        lambda n: _fill("x>" + "a" * 255 + "." + "a" * 9 + " ", n),
        READ_ONLY,
    ),
    "edit-command-dots": Case(_search(shell._EDIT_COMMAND), lambda n: _fill(">a.", n), READ_ONLY),
    # _VOLATILE: one run of digits; decimals; clock-like digits; durations at their bounds.
    "volatile-run": Case(
        _sub(shell._VOLATILE, "#"),
        lambda n: "1" * n,
        "Ran 83 tests in 0.218s\n",
    ),
    "volatile-decimals": Case(
        _sub(shell._VOLATILE, "#"),
        lambda n: _fill("1.", n),
        "took 1.5s ",
    ),
    "volatile-clock": Case(_sub(shell._VOLATILE, "#"), lambda n: _fill("1:11:1", n), OUTPUT),
    "volatile-durations": Case(
        _sub(shell._VOLATILE, "#"),
        lambda n: _fill("12345678901234567.123456789012345678 ", n),
        "took 12.5s ",
    ),
    "volatile-dates": Case(
        _sub(shell._VOLATILE, "#"), lambda n: _fill("2026-01-02T10:11:1", n), OUTPUT
    ),
    # _PID: the word again and again; a pid of every digit; its separators at their bound.
    "pid-words": Case(_sub(shell._PID, "#"), lambda n: _fill("pid", n), OUTPUT),
    "pid-digits": Case(_sub(shell._PID, "#"), lambda n: "pid " + "1" * (n - 4), OUTPUT),
    "pid-separators": Case(_sub(shell._PID, "#"), lambda n: _fill("ppid=:# 1 ", n), OUTPUT),
    # _one_quoting: a quote never closed, all the quotes after it escaped; every kind of quote.
    "quoting-escaped": Case(
        shell._one_quoting,
        lambda n: ('"' + '\\"' * n)[:n],
        COMMAND,
    ),
    "quoting-backslashes": Case(
        shell._one_quoting,
        lambda n: _fill('"\\\\\\', n),
        COMMAND,
    ),
    "quoting-singles": Case(shell._one_quoting, lambda n: "'" * n, COMMAND),
    "quoting-doubles": Case(shell._one_quoting, lambda n: '"' * n, COMMAND),
    "quoting-words": Case(shell._one_quoting, lambda n: _fill("'a' ", n), COMMAND),
    "quoting-mixed": Case(shell._one_quoting, lambda n: _fill("'\"", n), COMMAND),
    "quoting-unclosed": Case(shell._one_quoting, lambda n: "'" + "a" * (n - 1), COMMAND),
    # _without_quoted: unclosed marks; empty quoted words; a mark and then text.
    "unquoting-unclosed": Case(shell._without_quoted, lambda n: "\u00ab" * n, SHAPE),
    "unquoting-empty": Case(shell._without_quoted, lambda n: _fill("\u00ab\u00bb", n), SHAPE),
    "unquoting-open": Case(shell._without_quoted, lambda n: "\u00ab" + "x" * (n - 1), SHAPE),
    # The entry points, which read a bounded slice of what they are given.
    "state-digits": Case(
        shell.state_of_output,
        lambda n: "1" * n,
        OUTPUT,
    ),
    "state-decimals": Case(shell.state_of_output, lambda n: _fill("1.", n), OUTPUT),
    "state-pids": Case(shell.state_of_output, lambda n: _fill("pid 1 ", n), OUTPUT),
    "edit-of-addresses": Case(shell.edit_of_command, lambda n: _fill("'1,", n), COMMAND),
    "edit-of-lines": Case(shell.edit_of_command, lambda n: _fill("edit 1:", n), COMMAND),
    "shape-escaped": Case(
        shell.shape_of_command,
        lambda n: ('"' + '\\"' * n)[:n],
        COMMAND,
    ),
    "shape-heredocs": Case(shell.shape_of_command, lambda n: _fill("<<", n), COMMAND),
    "shape-quotes": Case(shell.shape_of_command, lambda n: _fill("'\"", n), COMMAND),
    "is-edit-flags": Case(
        lambda text: shell.is_edit("bash", text), lambda n: "sed " + _fill("-a ", n - 4), SHAPE
    ),
    "is-edit-quoted": Case(
        lambda text: shell.is_edit("bash", text), lambda n: _fill("\u00ab>a.b\u00bb", n), SHAPE
    ),
}


BUDGET = 0.25
"""Seconds one scan of the 16 KiB text may take at most (every case takes under 10 ms), read
first: a quadratic scan fails here in a second or two instead of running for minutes on the
64 KiB text."""


def _within_budget(case: Case) -> None:
    start = time.process_time()
    case.scan(case.adversarial(SMALL))
    took = time.process_time() - start
    assert took <= BUDGET, f"16 KiB took {took:.2f} s"


@pytest.mark.parametrize("name", CASES)
def test_each_scan_costs_linear_time_on_adversarial_text(name: str) -> None:
    case = CASES[name]
    _within_budget(case)
    large, small = case.adversarial(SIZE), case.adversarial(SMALL)
    assert (len(large), len(small)) == (SIZE, SMALL)
    on_large, on_small = _fastest(case.scan, large, small)
    growth = on_large / on_small
    assert growth <= 8, f"{name}: four times the text cost {growth:.1f} times as much"


@pytest.mark.parametrize("name", CASES)
def test_each_scan_costs_at_most_five_times_an_ordinary_text_of_the_same_length(
    name: str,
) -> None:
    case = CASES[name]
    _within_budget(case)
    adversarial, ordinary = case.adversarial(SIZE), _fill(case.ordinary, SIZE)
    assert len(adversarial) == SIZE
    on_adversarial, on_ordinary = _fastest(case.scan, adversarial, ordinary)
    ratio = on_adversarial / on_ordinary
    assert ratio <= 5, f"{name}: {ratio:.1f} times an ordinary text of the same length"


def test_a_command_of_escaped_quotes_costs_at_most_five_times_an_ordinary_one() -> None:
    # A quote opened, then 2 047 escaped ones that cannot close it, in the 4 KiB read: each
    # is looked at once, not scanned again from each.
    hostile = '"' + '\\"' * 2047
    ordinary = _fill(
        'python -c "import json; print(json.dumps({\\"a\\": 1, \\"b\\": [1, 2]}))"\n', 4095
    )
    assert len(hostile) == len(ordinary) == 4095
    on_hostile, on_ordinary = _fastest(shell.shape_of_command, hostile, ordinary, 20)
    ratio = on_hostile / on_ordinary
    assert ratio <= 5, f"{ratio:.1f} times an ordinary command"


class _Counting(str):
    """A text that counts the characters its ``find`` reads (the quote scans' only search)."""

    read = 0

    def find(
        self, sub: str, start: SupportsIndex | None = None, end: SupportsIndex | None = None
    ) -> int:
        begin = 0 if start is None else int(start)
        stop = len(self) if end is None else int(end)
        found = super().find(sub, begin, stop)
        _Counting.read += (stop if found < 0 else found + len(sub)) - begin
        return found


def _read_per_character(scan: Scan, text: str) -> float:
    _Counting.read = 0
    scan(_Counting(text))
    return _Counting.read / len(text)


@pytest.mark.parametrize(
    ("scan", "text"),
    [
        (shell._one_quoting, "'\"" * 2048),
        (shell._one_quoting, '"' + '\\"' * 2047),
        (shell._one_quoting, "'" + "a" * 4095),
        (shell._one_quoting, ("sed -i '1i x' f.py && python -c \"print(1)\" " * 100)[:4096]),
        # One kind of quote and none of the other: the other's absence is read once, not
        # again from each quote (about n*n/4 characters).
        (shell._one_quoting, "'" * 4096),
        (shell._one_quoting, '"' * 4096),
        (shell._one_quoting, "sed -i 's/a/b/' f.py; " * 200),
        (shell._without_quoted, "\u00ab\u00bb" * 2048),
        (shell._without_quoted, "\u00ab" * 4096),
        (shell._without_quoted, "sed \u00ab#i x\u00bb f.py " * 256),
    ],
    ids=[
        "mixed-quotes",
        "escaped-quotes",
        "unclosed",
        "command",
        "single-quotes",
        "double-quotes",
        "sed-scripts",
        "empty-words",
        "unclosed-marks",
        "shape",
    ],
)
def test_the_quote_scans_read_each_character_a_bounded_number_of_times(
    scan: Scan, text: str
) -> None:
    assert _read_per_character(scan, text) <= 4
