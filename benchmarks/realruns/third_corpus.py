"""The third corpus: BFCL v4 multi-turn runs of gpt-oss (function calling), read as runs.

Source: ``bbrowning/bfcl-vllm-results`` at ``COMMIT``, folder ``RESULTS``: the Berkeley Function
Calling Leaderboard's own inference harness driving ``openai/gpt-oss-120b`` and
``openai/gpt-oss-20b`` (served by vLLM, function calling) through the 200 tasks of
``multi_turn_base``. A task gives the model the functions of one or two of BFCL's simulated APIs
(``GorillaFileSystem``: ``ls``, ``cd``, ``cat``, ``grep``, ``mv``...; ``TwitterAPI``,
``MessageAPI``, ``TicketAPI``, ``TradingBot``, ``TravelAPI``, ``VehicleControlAPI``,
``MathAPI``: a dozen to thirty named functions with JSON arguments) and several user turns, each
fixed in advance (no simulated user). Within a turn the model is called until a reply calls no
function (the turn ends) or the harness stops it after 20 steps.

One result line (``BFCL_v4_multi_turn_base_result.json``: one JSON object a line, a task each) is
one run. Its ``inference_log`` holds, per user turn, ``step_N`` lists: the model's reply
(``assistant``, its ``content`` a list of ``{function: JSON arguments}``), the harness's notes
(``handler_log``) and one ``tool`` message per call, in the calls' order. Each step is a model
call, its tokens ``input_token_count[turn][step]`` / ``output_token_count[turn][step]``; each
function it asked for is a call of that tool with its arguments as a dict and its outcome the
``tool`` message's text exactly. A result that is a JSON object with an ``error`` member (how
BFCL's simulated APIs report a failed call), or that the harness wrote as the call raised
(``Error during execution: ...``), is a failure; no other text is read for errors. A
step whose reply asked for no function (the end of a turn, or a reply the harness could not
decode) is a model call that called no tool. A result whose inference failed (the server's
error in ``traceback``, no ``inference_log``) is a run with nothing in it.

Pass/fail: the score file of the same run (``BFCL_v4_multi_turn_base_score.json``) lists the
tasks that failed (after a summary line); a task not listed passed.

Run ids are ``<model folder>/<task id>`` (``openai_gpt-oss-120b/multi_turn_base_2``). The split:
task ids sorted, a task is in the training half where ``int(sha256(task id), 16)`` is even; both
models' runs of a task go to the same half (``train-ids-third.txt``). Only those are extracted.

    python3 benchmarks/realruns/third_corpus.py DATA --extract GIT_DIR [--write-resolved]

writes ``DATA/third/<model folder>/<task id>.json`` (each run's line, as it is) from the git
directory of ``bbrowning/bfcl-vllm-results`` and, with ``--write-resolved``, the training half's
pass/fail labels to ``resolved-third.json`` beside this file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the tree this script belongs to, first

from otel_loopguard.engine.replay import Call  # noqa: E402
from otel_loopguard.recorded.agent_logs import (  # noqa: E402
    AgentLogError,
    as_int,
    new_run,
    read_document,
    spent,
    tool_span,
)
from otel_loopguard.recorded.runs import RecordedCall, RecordedRun  # noqa: E402

__all__ = [
    "COMMIT",
    "MODELS",
    "REPOSITORY",
    "RESULTS",
    "extract",
    "in_training_half",
    "read_third",
    "resolved_of",
    "run_ids",
]

REPOSITORY = "bbrowning/bfcl-vllm-results"
COMMIT = "f98223aef4e7a560e2d2d69849dfb04eed260a52"
RESULTS = "results/2025-11-12-harmony-fixes"
MODELS = ("openai_gpt-oss-120b", "openai_gpt-oss-20b")
CATEGORY = "multi_turn_base"
AGENT = "BFCL multi-turn (function calling)"
IDS = HERE / "train-ids-third.txt"
RESOLVED = HERE / "resolved-third.json"

EXECUTION_ERROR = "Error during execution: "
"""What BFCL's harness writes as a call's result where executing it raised (a wrong argument...)."""
_STEP = re.compile(r"step_(\d{1,4})")
_LINE_ID = re.compile(r'\{"id": "([A-Za-z0-9_]{1,80})"')
"""The task id that opens a result or score line: read without parsing the rest of the line."""


def in_training_half(task: str) -> bool:
    """The split: a task is studied here where its id's SHA-256, as a number, is even."""
    return int(hashlib.sha256(task.encode()).hexdigest(), 16) % 2 == 0


def run_ids() -> list[str]:
    """The training half's run ids (``<model folder>/<task id>``)."""
    return IDS.read_text().split()


def read_third(
    path: str, prices: Mapping[str, tuple[float, float, float]] | None = None
) -> RecordedRun:
    """The run in one BFCL multi-turn result line, keyed ``<folder>/<task id>``."""
    document = read_document(path, "BFCL multi-turn result")
    task = document.get("id")
    log = document.get("inference_log")
    if not isinstance(task, str) or not (isinstance(log, list) or "traceback" in document):
        raise AgentLogError(f"{path}: not a BFCL multi-turn result: no 'id' or 'inference_log'")
    folder = Path(path).parent.name
    model = folder.split("_", 1)[1] if folder.startswith("openai_") else None
    run = new_run(f"{folder}/{task}" if folder else task, AGENT, model)
    if not isinstance(log, list):
        return run  # the inference failed (the server's error, in 'traceback'): nothing ran
    inputs = document.get("input_token_count")
    outputs = document.get("output_token_count")
    turns = [entry for entry in log if isinstance(entry, dict)]  # the rest: state snapshots
    for turn_index, turn in enumerate(turns):
        steps = sorted(
            (int(match.group(1)), messages)
            for name, messages in turn.items()
            if (match := _STEP.fullmatch(name)) is not None and isinstance(messages, list)
        )
        for step_index, messages in steps:
            calls = _calls(messages)
            run.items.append(
                spent(
                    prices or {},
                    input_tokens=_count(inputs, turn_index, step_index),
                    output_tokens=_count(outputs, turn_index, step_index),
                    model=model,
                    tool_calls=len(calls),
                )
            )
            results = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
            for index, (tool, args) in enumerate(calls):
                result = _text(results[index].get("content")) if index < len(results) else None
                error = result if result is not None and _failed(result) else None
                call = Call(tool, args, result, error)
                run.items.append(RecordedCall(call, tool_span(tool), None))
    return run


def _calls(messages: Sequence[Any]) -> list[tuple[str, object]]:
    """The functions the step's reply asked for, in order: (name, arguments as a dict, or as
    the text the model wrote where it is not a JSON object)."""
    reply = next(
        (m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"), None
    )
    content = reply.get("content") if reply is not None else None
    if not isinstance(content, list):
        return []  # no reply, or one the harness could not decode: no function was called
    calls: list[tuple[str, object]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        for name, raw in part.items():
            args: object = raw
            if isinstance(raw, str):
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                args = parsed if isinstance(parsed, dict) else raw
            calls.append((str(name), args))
    return calls


def _failed(result: str) -> bool:
    """A failed call: the harness's own report of the call raising (``EXECUTION_ERROR``, the
    prefix it writes), or a simulated API's own failure (a JSON object with an ``error``
    member)."""
    if result.startswith(EXECUTION_ERROR):
        return True
    if not result.startswith("{"):
        return False
    try:
        parsed = json.loads(result)
    except ValueError:
        return False
    return isinstance(parsed, dict) and "error" in parsed


def _text(content: object) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def _count(counts: object, turn: int, step: int) -> int:
    """``counts[turn][step]`` where the result holds it, else 0."""
    if isinstance(counts, list) and turn < len(counts):
        row = counts[turn]
        if isinstance(row, list) and step < len(row):
            return as_int(row[step], "tokens")
    return 0


def _show(git_dir: str, path: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{path}"],
        check=True,
        capture_output=True,
    ).stdout


def _lines_by_task(data: bytes, wanted: set[str]) -> dict[str, bytes]:
    """The lines of the wanted tasks, told by the id that opens each line (no other line is
    parsed)."""
    found: dict[str, bytes] = {}
    for line in data.splitlines():
        match = _LINE_ID.match(line.decode("utf-8", "replace")[:120])
        if match is not None and match.group(1) in wanted:
            found[match.group(1)] = line
    return found


def resolved_of(git_dir: str) -> dict[str, bool]:
    """The training half's pass/fail labels: a task its score file lists failed."""
    wanted: dict[str, set[str]] = {}
    for run in run_ids():
        folder, task = run.split("/", 1)
        wanted.setdefault(folder, set()).add(task)
    resolved: dict[str, bool] = {}
    for folder, tasks in wanted.items():
        score = f"{RESULTS}/score/{folder}/multi_turn/BFCL_v4_{CATEGORY}_score.json"
        failed = _lines_by_task(_show(git_dir, score), tasks)
        for task in sorted(tasks, key=_task_order):
            resolved[f"{folder}/{task}"] = task not in failed
    return resolved


def extract(git_dir: str, data_dir: Path, write_resolved: bool = False) -> None:
    """The training half's runs written under ``data_dir/third``, each read from the result file
    by its id; with ``write_resolved``, their labels to ``resolved-third.json``."""
    wanted: dict[str, set[str]] = {}
    for run in run_ids():
        folder, task = run.split("/", 1)
        if not in_training_half(task):
            raise SystemExit(f"{run}: listed, but not in the training half")
        wanted.setdefault(folder, set()).add(task)
    written = 0
    for folder, tasks in wanted.items():
        result = f"{RESULTS}/result/{folder}/multi_turn/BFCL_v4_{CATEGORY}_result.json"
        lines = _lines_by_task(_show(git_dir, result), tasks)
        missing = sorted(tasks - lines.keys())
        if missing:
            raise SystemExit(f"{folder}: {len(missing)} runs not found (first: {missing[0]})")
        for task, line in lines.items():
            target = data_dir / "third" / folder / f"{task}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(line + b"\n")
            written += 1
    print(f"third (BFCL multi-turn): {written} runs written under {data_dir / 'third'}")
    if write_resolved:
        resolved = resolved_of(git_dir)
        RESOLVED.write_text(json.dumps(resolved, indent=1) + "\n")
        print(f"{sum(resolved.values())} of {len(resolved)} resolved: written to {RESOLVED}")


def path_of(data_dir: Path, run: str) -> Path:
    folder, task = run.split("/", 1)
    return data_dir / "third" / folder / f"{task}.json"


def _task_order(task: str) -> tuple[str, int]:
    stem, _, number = task.rpartition("_")
    return (stem, int(number) if number.isdigit() else -1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="the directory the runs are written under")
    parser.add_argument("--extract", metavar="GIT_DIR", required=True)
    parser.add_argument("--write-resolved", action="store_true")
    args = parser.parse_args()
    extract(args.extract, args.data, args.write_resolved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
