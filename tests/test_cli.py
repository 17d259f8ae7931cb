"""The main job: ``otel-loopguard demo`` (and ``validate``), run as a user would run them."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from otel_loopguard.cli.demo import SCENARIOS
from otel_loopguard.config.environment import ENV_CONFIG, ENV_DISABLED, ENV_FIELDS

from .otlp_receiver import OtlpReceiver


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = shutil.which("otel-loopguard")
    base = [command] if command else [sys.executable, "-m", "otel_loopguard.cli.main"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    return subprocess.run(
        [*base, *args], capture_output=True, text=True, timeout=120, env={**clean, **(env or {})}
    )


def test_demo_shows_every_scenario_caught() -> None:
    result = run("demo", "--no-color")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for scenario in SCENARIOS:
        assert f"== {scenario}:" in out
    # Escalation: the first critical blocks, the second aborts the run; off for "breaker".
    assert shown(out, "#21", "read_file", "BLOCKED [generic_repeat, count 20]")
    assert shown(out, "#22", "read_file", "ABORTED [generic_repeat, count 21]")
    assert shown(out, "#21-30", "read_file", "BLOCKED [generic_repeat, count 20..29]")
    assert shown(out, "#31", "read_file", "ABORTED [global_circuit_breaker, count 30]")
    assert shown(out, "#20", "list_dir", "BLOCKED [ping_pong, count 20]")
    assert shown(out, "#21", "read_file", "ABORTED [ping_pong, count 21]")
    assert "BLOCKED [known_poll_no_progress, count 20]" in out
    assert "BLOCKED [unknown_tool_repeat, count 10]" in out
    # The compaction abort is shown on the call whose span carries it: the window's third.
    assert shown(out, "#8", "read_file", "ABORTED [compaction_loop_persisted, count 3]")
    assert "run stopped after this call: CompactionLoopPersisted" in out
    assert "loopguard.detections{detector=compaction_loop_persisted, action=abort} = 1" in out
    # One event per counted detection.
    events = int(out.split("loopguard.loop_detected events: ")[1].split()[0])
    counted = sum(
        int(line.rsplit("= ", 1)[1]) for line in out.splitlines() if "detections{" in line
    )
    assert events == counted
    assert "Traceback" not in result.stderr


def test_demo_prints_each_loops_cost_and_what_stopping_saved() -> None:
    from otel_loopguard.cli.demo import model_tokens

    out = run("demo", "--no-color", "--scenario", "repeated-read").stdout
    (line,) = [line for line in out.splitlines() if line.startswith("  tokens:")]
    made = sum(sum(model_tokens(n)) for n in range(1, 23))  # aborted at the 22nd call
    # The loop: from the 2nd model call (after the loop's first call) to the 22nd.
    loop = made - sum(model_tokens(1))
    saved = sum(sum(model_tokens(n)) for n in range(23, 61))
    assert line.startswith(f"  tokens: {made} in model calls; the loop: {loop} (cost ")
    assert f"stopping it saved {saved}" in line


def shown(out: str, number: str, tool: str, verdict: str) -> bool:
    """Whether the demo printed ``verdict`` on the line of call ``number`` (a call of ``tool``)."""
    return any(
        line.split()[0] == number and f"{tool}(" in line and line.endswith(verdict)
        for line in out.splitlines()
        if line.strip()
    )


def test_demo_runs_one_scenario() -> None:
    result = run("demo", "--scenario", "ping-pong", "--no-color")
    assert result.returncode == 0
    assert "== ping-pong:" in result.stdout
    assert "== repeated-read:" not in result.stdout


def test_demo_exports_with_the_real_otlp_exporter() -> None:
    with OtlpReceiver() as receiver:
        base = receiver.endpoint.removesuffix("/v1/traces")
        result = run("demo", "--scenario", "compaction", "--otlp-endpoint", base)
    assert result.returncode == 0, result.stderr
    names = {s.name for s in receiver.spans}
    assert "invoke_agent compaction" in names
    events = [e for s in receiver.spans for e in s.events if e.name == "loopguard.loop_detected"]
    assert events
    assert "Exported to OTLP" in result.stdout


def test_demo_sends_the_breaker_abort_as_a_span_and_a_counter_over_otlp() -> None:
    with OtlpReceiver() as receiver:
        base = receiver.endpoint.removesuffix("/v1/traces")
        result = run("demo", "--scenario", "breaker", "--otlp-endpoint", base)
    assert result.returncode == 0, result.stderr
    tools = [s for s in receiver.spans if s.name == "execute_tool read_file"]
    assert len(tools) == 31  # every call the demo shows has its span, the abort included
    last = {a.key: a.value for a in tools[-1].attributes}
    assert last["loopguard.detector"].string_value == "global_circuit_breaker"
    assert last["loopguard.action"].string_value == "abort"
    (agent,) = [s for s in receiver.spans if s.name == "invoke_agent breaker"]
    assert agent.status.code == 2  # STATUS_CODE_ERROR: the run failed
    assert {a.key: a.value for a in agent.attributes}["error.type"].string_value == (
        "global_circuit_breaker"
    )
    points = {
        (
            {a.key: a.value.string_value for a in point.attributes}["loopguard.detector"],
            {a.key: a.value.string_value for a in point.attributes}["loopguard.action"],
        ): point.as_int
        for metric in receiver.metrics
        if metric.name == "loopguard.detections"
        for point in metric.sum.data_points
    }
    # What the Collector's LoopGuardCircuitBreakerTripped alert counts, from the app's side.
    assert points[("global_circuit_breaker", "abort")] == 1
    assert points[("generic_repeat", "block")] == 10


def test_demo_honours_the_standard_otlp_variables() -> None:
    with OtlpReceiver() as receiver:
        result = run(
            "demo",
            "--scenario",
            "stuck-poll",
            env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint},
        )
    assert result.returncode == 0, result.stderr
    assert any(s.name == "execute_tool command_status" for s in receiver.spans)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_endpoint_is_a_clear_message_not_a_traceback() -> None:
    result = run("demo", "--otlp-endpoint", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2
    assert "cannot reach the OTLP endpoint" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_option_is_a_clear_message() -> None:
    result = run("demo", "--scenario", "no-such-loop")
    assert result.returncode == 2
    assert "invalid choice: 'no-such-loop'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_malformed_endpoint_is_refused() -> None:
    result = run("demo", "--otlp-endpoint", "not a url")
    assert result.returncode == 2
    assert "is not a URL" in result.stderr


def test_help_explains_every_option() -> None:
    result = run("demo", "--help")
    assert result.returncode == 0
    for option in ("--scenario", "--otlp-endpoint", "--otlp-protocol", "--config", "--no-color"):
        assert option in result.stdout


def test_validate_reports_a_bad_config_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("tools:\n  loopDetection:\n    histroySize: 30\n")
    result = run("validate", str(path))
    assert result.returncode == 2
    assert "tools.loopDetection.histroySize: unknown key" in result.stderr
    good = tmp_path / "good.json"
    good.write_text('{"enabled": true}')
    assert run("validate", str(good)).returncode == 0


def test_validate_names_a_shared_store_without_its_password(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    store = {"url": "rediss://alice:s3cret-pw@cache.internal:6380/2", "timeoutMs": 20}
    path.write_text(json.dumps({"enabled": True, "store": store}))
    result = run("validate", str(path))
    assert result.returncode == 0, result.stderr
    assert row(result.stdout, "store") == [
        "store",
        "Redis / Valkey at 'rediss://alice:***@cache.internal:6380/2', timeout 20 ms, keys "
        "loopguard:*",
        "(file)",
    ]
    assert "s3cret" not in result.stdout + result.stderr


def row(out: str, setting: str) -> list[str]:
    """The cells of a settings table row, split on the two-space column gaps."""
    line = next(line for line in out.splitlines() if line.startswith(setting + " "))
    return [cell.strip() for cell in line.split("  ") if cell.strip()]


def test_validate_prints_the_effective_settings_per_agent_and_where_each_came_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "loopguard.yaml"
    path.write_text(
        "tools:\n  loopDetection: {enabled: true, warningThreshold: 12}\n"
        "agents:\n  list:\n    - id: safe-runner\n"
        "      tools: {loopDetection: {warningThreshold: 8, criticalThreshold: 16}}\n"
    )
    result = run("validate", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "agent 'safe-runner'" in out.splitlines()[2]
    assert row(out, "warningThreshold") == ["warningThreshold", "12", "(file)", "8", "(agent)"]
    assert row(out, "historySize") == ["historySize", "30", "(default)", "30", "(default)"]
    assert row(out, "enabled") == ["enabled", "true", "(file)", "true", "(file)"]
    assert row(out, "scope") == ["scope", "trace", "(default)"]
    assert "No value was changed" in out


def test_validate_reads_openclaws_agent_map_and_names_the_profiles_defaults(
    tmp_path: Path,
) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(
        '{"tools": {"loopDetection": {"enabled": true, "profile": "openclaw"}},'
        ' "agents": {"entries": {"safe": {"default": true,'
        ' "tools": {"loopDetection": {"warningThreshold": 5}}}}}}'
    )
    result = run("validate", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "agent 'safe'" in out.splitlines()[2]
    assert row(out, "profile") == ["profile", "openclaw", "(file)", "openclaw", "(file)"]
    assert row(out, "warningThreshold") == ["warningThreshold", "10", "(default)", "5", "(agent)"]
    assert row(out, "breakerAborts")[1:3] == ["false", "(profile openclaw)"]
    assert "profile openclaw: every verdict as OpenClaw 2026.9.6 gives it" in out


def test_validate_shows_every_normalisation_and_a_breaker_that_cannot_fire(
    tmp_path: Path,
) -> None:
    path = tmp_path / "loopguard.json"
    path.write_text('{"criticalThreshold": 5, "historySize": 20}')
    result = run("validate", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert row(out, "criticalThreshold") == ["criticalThreshold", "11", "(raised from 5)"]
    assert "tools.loopDetection: criticalThreshold 5 \u2264 warningThreshold 10 \u2192 11" in out
    assert "globalCircuitBreakerThreshold 30 > historySize 20" in out
    assert "can never fire" in out


def test_validate_explains_an_error_in_the_users_words(tmp_path: Path) -> None:
    path = tmp_path / "loopguard.json5"
    path.write_text("{agents: {list: [{tools: {}}]}, loopDetection: {}}")
    result = run("validate", str(path))
    assert result.returncode == 2
    assert "agents.list.0.id: missing" in result.stderr
    assert "'loopDetection' is not allowed here; it belongs in tools" in result.stderr
    assert "Field required" not in result.stderr


def without_loopguard_variables() -> dict[str, str]:
    """Blanks (unset, to the environment's readers) for otel-loopguard's configuration variables
    of this process's environment, if it has any."""
    named = {*ENV_FIELDS, ENV_CONFIG, ENV_DISABLED}
    return {k: "" for k in os.environ if k in named}


def test_validate_without_a_path_reads_the_environment_and_says_where_each_value_came_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "loopguard.yaml"
    path.write_text(
        "tools:\n  loopDetection: {enabled: true, warningThreshold: 12, historySize: 40}\n"
        "agents:\n  list:\n    - id: safe-runner\n"
        "      tools: {loopDetection: {criticalThreshold: 16}}\n"
    )
    env = {
        **without_loopguard_variables(),
        "OTEL_LOOPGUARD_CONFIG": str(path),
        "OTEL_LOOPGUARD_WARNING_THRESHOLD": "7",
        "OTEL_LOOPGUARD_SCOPE": "conversation",
    }
    result = run("validate", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.splitlines()[0] == "environment: valid"
    assert f"OTEL_LOOPGUARD_CONFIG: {path}" in out
    assert "variables: OTEL_LOOPGUARD_SCOPE, OTEL_LOOPGUARD_WARNING_THRESHOLD" in out
    # The variable lays over the file's global block; the agent's own block wins for its key.
    assert row(out, "warningThreshold") == ["warningThreshold", "7", "(env)", "7", "(env)"]
    assert row(out, "historySize") == ["historySize", "40", "(file)", "40", "(file)"]
    assert row(out, "criticalThreshold") == [
        "criticalThreshold",
        "20",
        "(default)",
        "16",
        "(agent)",
    ]
    assert row(out, "observeOnly") == ["observeOnly", "false", "(default)", "false", "(default)"]
    assert row(out, "scope") == ["scope", "conversation", "(environment)"]


def test_validate_without_a_path_lists_what_the_application_would_ignore(tmp_path: Path) -> None:
    env = {
        **without_loopguard_variables(),
        "OTEL_LOOPGUARD_CONFIG": str(tmp_path / "missing.json"),
        "OTEL_LOOPGUARD_ENABLED": "yes",
        "OTEL_LOOPGUARD_HISTORY_SIZE": "0",
        "OTEL_LOOPGUARD_CRITICAL_THRESHOLD": "25",
    }
    result = run("validate", env=env)
    assert result.returncode == 1
    out = result.stdout
    assert out.splitlines()[0] == "environment: 3 ignored"
    assert "configuration file not found" in out
    assert "OTEL_LOOPGUARD_ENABLED: got 'yes'; allowed: true or false (ignored)" in out
    assert "OTEL_LOOPGUARD_HISTORY_SIZE: got '0'; allowed: an integer >= 1 (ignored)" in out
    # What could be used still is, and the table shows it.
    assert row(out, "criticalThreshold") == ["criticalThreshold", "25", "(env)"]
    assert row(out, "enabled") == ["enabled", "unset", "(default)"]


def test_validate_zero_code_reads_the_environment_as_the_configurator_does() -> None:
    env = {
        **without_loopguard_variables(),
        "OTEL_LOOPGUARD_OBSERVE_ONLY": "false",
        "OTEL_LOOPGUARD_DISABLED": "true",
    }
    result = run("validate", "--zero-code", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert row(out, "enabled") == ["enabled", "true", "(zero-code)"]
    assert row(out, "observeOnly") == ["observeOnly", "false", "(env)"]
    assert "OTEL_LOOPGUARD_DISABLED=true: otel-loopguard does nothing" in out
    # The plain reading has no zero-code defaults: only the post-compaction guard.
    plain = run("validate", env=env).stdout
    assert row(plain, "enabled") == ["enabled", "unset", "(default)"]


def test_validate_zero_code_with_a_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loopguard.json"
    path.write_text("{}")
    result = run("validate", "--zero-code", str(path))
    assert result.returncode == 2
    assert "--zero-code reads the environment: give no FILE with it" in result.stderr


def test_version() -> None:
    from importlib.metadata import version

    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"otel-loopguard {version('otel-loopguard')}"


def _without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command run with ``module`` missing, as in a core install without the extra."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; from otel_loopguard.cli.main import main; "
        f"raise SystemExit(main({list(args)!r}))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_missing_extra_errors_have_one_wording_and_prefix() -> None:
    """``serve``, ``mcp-proxy`` and ``receive`` without their extra: one line each, the same
    words, whichever of the extra's modules is missing."""
    found = []
    receive = ["receive", "--listen", "127.0.0.1:0", "--export", "http://127.0.0.1:1"]
    for command, module, extra in (
        (["serve", "--listen", "127.0.0.1:0"], "starlette", "serve"),
        (["serve", "--listen", "127.0.0.1:0"], "uvicorn", "serve"),
        (["mcp-proxy", "--", "true"], "mcp", "mcp"),
        (receive, "starlette", "receive"),
        (receive, "uvicorn", "receive"),
    ):
        result = _without(module, *command)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1, result.stderr
        found.append(result.stderr.strip())
        assert result.stderr.strip() == (
            f"otel-loopguard {command[0]}: error: needs the {extra} extra ({module} is not "
            f'installed): python3 -m pip install -e ".[{extra}]" (from the root of a clone of '
            "this repository)"
        )
    assert len(found) == 5


def test_every_config_option_is_named_file_in_the_help() -> None:
    """``--config`` (and replay's ``--prices``, and validate's argument) read a file: each
    command's help calls it FILE, never PATH."""
    for command in ("demo", "validate", "replay", "serve", "mcp-proxy", "receive"):
        shown = run(command, "--help")
        assert shown.returncode == 0, shown.stderr
        text = " ".join(shown.stdout.split())
        assert not re.search(r"--(config|prices) PATH", text), command
        if command == "validate":
            assert "validate [-h] [--zero-code] [FILE]" in text
        else:
            assert "--config FILE" in text, command
    assert "--prices FILE" in " ".join(run("replay", "--help").stdout.split())


def test_mcp_proxy_help_says_it_needs_its_extra() -> None:
    shown = " ".join(run("mcp-proxy", "--help").stdout.split())
    assert 'Needs the mcp extra: python3 -m pip install -e ".[mcp]"' in shown
    assert "(needs the mcp extra)" in " ".join(run("--help").stdout.split())


def test_hook_help_describes_the_command() -> None:
    shown = run("hook", "--help")
    assert shown.returncode == 0
    description = shown.stdout.split("\n\n")[1]
    assert "command hook" in description
    assert "stdin" in description
    assert "stdout" in description
