"""Zero-code set-up: a real ``opentelemetry-instrument python app.py`` whose only otel-loopguard
setting is ``OTEL_PYTHON_CONFIGURATOR=loopguard``, exporting with the real OTLP exporter to a
receiver on 127.0.0.1."""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk._configuration import _initialize_components

from .otlp_receiver import OtlpReceiver
from .test_otlp_export import values

# An application that knows nothing of otel-loopguard or of the SDK: it uses the OpenTelemetry
# API, as an instrumented agent framework would, and an agent that repeats one call 25 times.
APP = """
from opentelemetry import trace

tracer = trace.get_tracer("app")
agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "app"}
with tracer.start_as_current_span("invoke_agent app", attributes=agent):
    for _ in range(25):
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "read_file",
            "gen_ai.tool.call.arguments": '{"path": "notes.txt"}',
        }
        with tracer.start_as_current_span("execute_tool read_file", attributes=tool) as span:
            span.set_attribute("gen_ai.tool.call.result", "the same contents")
print("app done")
"""


# A compaction, then the same call three times: the post-compaction guard's abort completes at
# the third call's end, after its span can change.
COMPACTION_APP = APP.replace(
    "    for _ in range(25):",
    "    compaction = {'loopguard.compaction': True}\n"
    "    with tracer.start_as_current_span('compaction', attributes=compaction):\n"
    "        pass\n"
    "    for _ in range(3):",
)


def instrument() -> str:
    """The ``opentelemetry-instrument`` command beside this Python (opentelemetry-distro)."""
    here = Path(sys.executable).parent / "opentelemetry-instrument"
    command = str(here) if here.exists() else shutil.which("opentelemetry-instrument")
    if command is None:
        pytest.fail("opentelemetry-instrument is missing: pip install -e '.[test]'")
    return command


def test_the_configurator_entry_point_is_registered() -> None:
    (point,) = entry_points(group="opentelemetry_configurator", name="loopguard")
    assert point.value == "otel_loopguard.configurator:LoopGuardConfigurator", (
        "the installed metadata is stale: pip install -e ."
    )


def run_app(
    tmp_path: Path,
    receiver: OtlpReceiver,
    app_text: str = APP,
    *,
    capture_stdout: bool = False,
    **variables: str,
) -> str:
    app = tmp_path / "app.py"
    app.write_text(app_text)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "PYTHONPATH"))
        or k in ("OTEL_LOOPGUARD_SPAN_READER", "OTEL_LOOPGUARD_STRICT")
    }
    # The checkout under test comes first, as it does for this test process.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(
        OTEL_SERVICE_NAME="zero-code-app",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.endpoint,
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="*",
        **variables,
    )
    result = subprocess.run(
        [instrument(), sys.executable, str(app)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "app done" in result.stdout
    return result.stdout if capture_stdout else result.stderr


def tools(receiver: OtlpReceiver) -> list[Span]:
    return [s for s in receiver.spans if s.name == "execute_tool read_file"]


def loop_events(span: Span) -> list[dict[str, object]]:
    return [values(list(e.attributes)) for e in span.events if e.name == "loopguard.loop_detected"]


def test_one_variable_turns_it_on_for_an_uninstrumented_app_observe_only(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        run_app(tmp_path, receiver, OTEL_PYTHON_CONFIGURATOR="loopguard")
    spans = tools(receiver)
    assert len(spans) == 25
    warned = loop_events(spans[10])  # the 11th identical call
    assert warned[0]["loopguard.detector"] == "generic_repeat"
    assert warned[0]["loopguard.level"] == "warning"
    critical = values(list(spans[20].attributes))  # the 21st: what blocking would have done
    assert critical["loopguard.level"] == "critical"
    assert critical["loopguard.observe_only"] is True
    assert critical["loopguard.intended_action"] == "block"
    assert "loopguard.blocked" not in critical  # observe-only: nothing was blocked
    assert all(not loop_events(s) for s in spans[:10])


def test_the_configuration_can_turn_blocking_on(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        run_app(
            tmp_path,
            receiver,
            OTEL_PYTHON_CONFIGURATOR="loopguard",
            OTEL_LOOPGUARD_OBSERVE_ONLY="false",
        )
    critical = values(list(tools(receiver)[20].attributes))
    assert critical["loopguard.action"] == "block"
    assert "loopguard.observe_only" not in critical


# The agent asks the guard zero-code set-up built before each tool runs (blocking needs the
# agent's cooperation): a stubborn model's 25 identical calls, and the tool body's runs counted.
ASKING_APP = """
from opentelemetry import trace
from otel_loopguard.configurator import installed_guard

guard = installed_guard()
runs = 0

@guard.tool
def read_file(path: str) -> str:
    global runs
    runs += 1
    return "the same contents"

tracer = trace.get_tracer("app")
with tracer.start_as_current_span("invoke_agent app", attributes={"gen_ai.agent.name": "app"}):
    answers = [read_file(path="notes.txt") for _ in range(25)]
print("tool runs", runs)
print("app done")
"""


def test_the_agent_asks_the_installed_guard_and_blocking_stops_the_tool(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        result = run_app(
            tmp_path,
            receiver,
            ASKING_APP,
            OTEL_PYTHON_CONFIGURATOR="loopguard",
            OTEL_LOOPGUARD_OBSERVE_ONLY="false",
            capture_stdout=True,
        )
    runs = int(result.split("tool runs ", 1)[1].split()[0])
    assert runs == 20  # blocked at the 21st call, the run aborted at the 22nd
    blocked = [
        s for s in tools(receiver) if values(list(s.attributes)).get("loopguard.blocked") is True
    ]
    assert blocked


def test_without_the_variable_the_sdk_is_set_up_as_usual(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        run_app(tmp_path, receiver, OTEL_PYTHON_CONFIGURATOR="configurator")
    spans = tools(receiver)
    assert len(spans) == 25
    assert not any(loop_events(s) for s in spans)


def test_the_kill_switch_wins(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        run_app(
            tmp_path, receiver, OTEL_PYTHON_CONFIGURATOR="loopguard", OTEL_LOOPGUARD_DISABLED="true"
        )
    spans = tools(receiver)
    assert len(spans) == 25
    assert not any(loop_events(s) for s in spans)


def test_the_agent_asking_the_installed_guard_still_runs_under_the_kill_switch(
    tmp_path: Path,
) -> None:
    # installed_guard() is a guard that lets every call through when set-up was switched off.
    with OtlpReceiver() as receiver:
        result = run_app(
            tmp_path,
            receiver,
            ASKING_APP,
            OTEL_PYTHON_CONFIGURATOR="loopguard",
            OTEL_LOOPGUARD_DISABLED="true",
            OTEL_LOOPGUARD_OBSERVE_ONLY="false",
            capture_stdout=True,
        )
    assert "tool runs 25" in result
    assert not any(loop_events(s) for s in tools(receiver))


def test_the_agent_asking_the_installed_guard_runs_without_zero_code_set_up(
    tmp_path: Path,
) -> None:
    app = tmp_path / "app.py"
    app.write_text(ASKING_APP)
    result = subprocess.run(
        [sys.executable, str(app)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "tool runs 25" in result.stdout


def test_a_bad_environment_never_stops_the_app(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        stderr = run_app(
            tmp_path,
            receiver,
            OTEL_PYTHON_CONFIGURATOR="loopguard",
            OTEL_LOOPGUARD_CONFIG=str(tmp_path / "missing.yaml"),
            OTEL_LOOPGUARD_WARNING_THRESHOLD="ten",
        )
    assert "OTEL_LOOPGUARD_CONFIG" in stderr
    assert "OTEL_LOOPGUARD_WARNING_THRESHOLD: got 'ten'" in stderr
    assert "Traceback" not in stderr
    # Both ignored: the defaults apply.
    assert loop_events(tools(receiver)[10])[0]["loopguard.count"] == 10


def test_a_detection_after_the_span_ended_reaches_the_exporter(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        run_app(tmp_path, receiver, COMPACTION_APP, OTEL_PYTHON_CONFIGURATOR="loopguard")
    third = tools(receiver)[2]
    (agent,) = [s for s in receiver.spans if s.name == "invoke_agent app"]
    if "export_span_processor" in inspect.signature(_initialize_components).parameters:
        # The guard's processor owns the exporting one: an enriched copy of the tool span.
        assert loop_events(third)[0]["loopguard.detector"] == "compaction_loop_persisted"
    else:  # SDK 1.27: standalone, the event goes on the nearest live ancestor
        assert loop_events(agent)[0]["loopguard.detector"] == "compaction_loop_persisted"


# -- the GenAI completion hook ----------------------------------------------------------------

HOOK_APP = """
import os
print("hook:", os.environ.get("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK"))
print("next:", os.environ.get("OTEL_LOOPGUARD_NEXT_COMPLETION_HOOK"))
print("app done")
"""


def test_zero_code_selects_the_completion_hook_for_the_genai_instrumentations(
    tmp_path: Path,
) -> None:
    with OtlpReceiver() as receiver:
        out = run_app(
            tmp_path, receiver, HOOK_APP, capture_stdout=True, OTEL_PYTHON_CONFIGURATOR="loopguard"
        )
    assert "hook: loopguard" in out
    assert "next: None" in out


def test_zero_code_chains_a_completion_hook_the_application_chose(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        out = run_app(
            tmp_path,
            receiver,
            HOOK_APP,
            capture_stdout=True,
            OTEL_PYTHON_CONFIGURATOR="loopguard",
            OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK="upload",
        )
    assert "hook: loopguard" in out
    assert "next: upload" in out


def test_without_zero_code_the_completion_hook_is_left_alone(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        out = run_app(tmp_path, receiver, HOOK_APP, capture_stdout=True)
    assert "hook: None" in out
