"""Configuration: loading, validation, normalisation and per-agent resolution."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from pathlib import Path

import pytest

from otel_loopguard import ConfigError, LoopGuard, LoopGuardConfig, load_config
from otel_loopguard.config.environment import ConfigWarning
from otel_loopguard.config.settings import resolve

SEED_JSON5 = """
// The seed's configuration block, as written.
{
  tools: {
    loopDetection: {
      enabled: false, // master switch for the rolling-history detectors
      historySize: 30,
      warningThreshold: 10,
      criticalThreshold: 20,
      unknownToolThreshold: 10,
      globalCircuitBreakerThreshold: 30,
      detectors: {
        genericRepeat: true,
        knownPollNoProgress: true,
        pingPong: true,
      },
      postCompactionGuard: {
        windowSize: 3,
      },
    },
  },
  agents: {
    list: [
      {
        id: "safe-runner",
        tools: {
          loopDetection: {
            enabled: true,
            warningThreshold: 8,
            criticalThreshold: 16,
          },
        },
      },
    ],
  },
}
"""

SEED = {
    "tools": {
        "loopDetection": {
            "enabled": False,
            "historySize": 30,
            "warningThreshold": 10,
            "criticalThreshold": 20,
            "unknownToolThreshold": 10,
            "globalCircuitBreakerThreshold": 30,
            "detectors": {"genericRepeat": True, "knownPollNoProgress": True, "pingPong": True},
            "postCompactionGuard": {"windowSize": 3},
        }
    },
    "agents": {
        "list": [
            {
                "id": "safe-runner",
                "tools": {
                    "loopDetection": {
                        "enabled": True,
                        "warningThreshold": 8,
                        "criticalThreshold": 16,
                    }
                },
            }
        ]
    },
}

SEED_YAML = """
tools:
  loopDetection:
    enabled: false
    historySize: 30
    warningThreshold: 10
    criticalThreshold: 20
    unknownToolThreshold: 10
    globalCircuitBreakerThreshold: 30
    detectors: {genericRepeat: true, knownPollNoProgress: true, pingPong: true}
    postCompactionGuard: {windowSize: 3}
agents:
  list:
    - id: safe-runner
      tools:
        loopDetection: {enabled: true, warningThreshold: 8, criticalThreshold: 16}
"""

SEED_TOML = """
[tools.loopDetection]
enabled = false
historySize = 30
warningThreshold = 10
criticalThreshold = 20
unknownToolThreshold = 10
globalCircuitBreakerThreshold = 30
detectors = { genericRepeat = true, knownPollNoProgress = true, pingPong = true }
postCompactionGuard = { windowSize = 3 }

[[agents.list]]
id = "safe-runner"
tools.loopDetection = { enabled = true, warningThreshold = 8, criticalThreshold = 16 }
"""


def assert_is_seed(config: LoopGuardConfig) -> None:
    settings = resolve(config)
    default = settings.default
    assert default.enabled is False
    assert (default.warning_threshold, default.critical_threshold) == (10, 20)
    assert default.global_circuit_breaker_threshold == 30
    assert default.compaction_window_size == 3
    runner = settings.for_agent("safe-runner")
    assert runner.enabled is True
    assert (runner.warning_threshold, runner.critical_threshold) == (8, 16)
    assert runner.global_circuit_breaker_threshold == 30
    assert runner.history_size == 30


def test_the_seed_example_loads_from_a_mapping() -> None:
    assert_is_seed(load_config(SEED))


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".json", json.dumps(SEED)),
        (".json5", SEED_JSON5),
        (".yaml", SEED_YAML),
        (".yml", SEED_YAML),
        (".toml", SEED_TOML),
    ],
)
def test_the_seed_example_loads_from_each_file_format(
    tmp_path: Path, suffix: str, text: str
) -> None:
    path = tmp_path / f"loopguard{suffix}"
    path.write_text(text)
    assert_is_seed(load_config(path))
    assert_is_seed(load_config(str(path)))


def test_the_seed_example_loads_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "loopguard.json5"
    path.write_text(SEED_JSON5)
    monkeypatch.setenv("OTEL_LOOPGUARD_CONFIG", str(path))
    assert_is_seed(load_config(None))
    assert_is_seed(LoopGuard().config)


def test_single_fields_from_the_environment_override_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "loopguard.json"
    path.write_text(json.dumps(SEED))
    monkeypatch.setenv("OTEL_LOOPGUARD_CONFIG", str(path))
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", "true")
    monkeypatch.setenv("OTEL_LOOPGUARD_WARNING_THRESHOLD", "5")
    monkeypatch.setenv("OTEL_LOOPGUARD_POST_COMPACTION_WINDOW_SIZE", "4")
    settings = resolve(load_config(None))
    assert settings.default.enabled is True
    assert settings.default.warning_threshold == 5
    assert settings.default.compaction_window_size == 4
    assert settings.for_agent("safe-runner").warning_threshold == 8


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        ("OTEL_LOOPGUARD_HISTORY_SIZE", "0", "an integer >= 1"),
        ("OTEL_LOOPGUARD_HISTORY_SIZE", "ten", "an integer >= 1"),
        ("OTEL_LOOPGUARD_ENABLED", "maybe", "true or false"),
        ("OTEL_LOOPGUARD_OBSERVE_ONLY", "1", "true or false"),
        ("OTEL_LOOPGUARD_SCOPE", "planet", "'trace', 'conversation'"),
    ],
)
def test_a_bad_environment_value_is_warned_about_and_ignored(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, allowed: str
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_WARNING_THRESHOLD", "7")  # a good one beside it
    monkeypatch.setenv(variable, value)
    with pytest.warns(ConfigWarning) as caught:
        settings = LoopGuard().settings
    message = str(caught[0].message)
    assert variable in message
    assert repr(value) in message
    assert allowed in message
    assert settings.default == resolve(load_config({"warningThreshold": 7})).default


def test_a_bad_value_in_code_still_raises() -> None:
    with pytest.raises(ConfigError, match="historySize"):
        LoopGuard({"historySize": 0})


@pytest.mark.parametrize("value", ["true", "True", "TRUE"])
def test_only_true_in_any_case_is_true(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", value)
    assert LoopGuard().settings.default.enabled is True


@pytest.mark.parametrize("value", ["1", "yes", "on"])
def test_other_truthy_spellings_are_not_true(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", value)
    with pytest.warns(ConfigWarning, match="allowed: true or false"):
        assert LoopGuard().settings.default.enabled is None


def test_an_empty_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_HISTORY_SIZE", "")
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", "  ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = LoopGuard().settings.default
    assert (default.history_size, default.enabled) == (30, None)


@pytest.mark.parametrize(
    ("variables", "rolling", "active"),
    [
        ({}, False, True),
        ({"OTEL_LOOPGUARD_ENABLED": "true"}, True, True),
        ({"OTEL_LOOPGUARD_DISABLED": "true"}, False, False),
        ({"OTEL_LOOPGUARD_ENABLED": "true", "OTEL_LOOPGUARD_DISABLED": "true"}, False, False),
    ],
)
def test_the_three_states_of_enabled_from_two_boolean_variables(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], rolling: bool, active: bool
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    default = LoopGuard().settings.default
    assert (default.rolling_enabled, default.active) == (rolling, active)


def test_enabled_false_leaves_the_configuration_as_it_is_and_says_how_to_turn_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", "false")
    with pytest.warns(ConfigWarning, match="OTEL_LOOPGUARD_DISABLED=true"):
        default = LoopGuard().settings.default
    assert default.active is True  # the post-compaction guard still runs


def test_the_kill_switch_wins_over_a_configuration_passed_in_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_DISABLED", "TRUE")
    guard = LoopGuard(SEED)
    assert guard.settings.default.active is False
    assert guard.settings.for_agent("safe-runner").active is False
    verdicts = [guard.check("read_file", {"path": "a"}, scope="run") for _ in range(25)]
    assert {v.action for v in verdicts} == {"none"}


def test_the_kill_switch_off_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_DISABLED", "false")
    assert LoopGuard({"enabled": True}).settings.default.rolling_enabled is True


def test_no_configuration_means_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_LOOPGUARD_CONFIG", "OTEL_LOOPGUARD_ENABLED"):
        monkeypatch.delenv(name, raising=False)
    default = resolve(load_config(None)).default
    assert default.enabled is None
    assert default.history_size == 30
    assert (default.warning_threshold, default.critical_threshold) == (10, 20)
    assert (default.unknown_tool_threshold, default.global_circuit_breaker_threshold) == (10, 30)
    assert (default.generic_repeat, default.known_poll_no_progress, default.ping_pong) == (
        True,
    ) * 3
    assert default.compaction_window_size == 3


def test_camel_case_and_snake_case_are_both_accepted() -> None:
    camel = resolve(load_config({"warningThreshold": 7, "postCompactionGuard": {"windowSize": 2}}))
    snake = resolve(
        load_config({"warning_threshold": 7, "post_compaction_guard": {"window_size": 2}})
    )
    assert camel.default == snake.default
    assert snake.default.warning_threshold == 7


def test_a_bare_block_and_the_whole_shape_are_the_same() -> None:
    bare = resolve(load_config({"enabled": True, "historySize": 12}))
    whole = resolve(load_config({"tools": {"loopDetection": {"enabled": True, "historySize": 12}}}))
    assert bare.default == whole.default


@pytest.mark.parametrize(
    ("enabled", "rolling", "compaction"),
    [(None, False, True), (True, True, True), (False, False, False)],
)
def test_the_three_states_of_enabled(enabled: bool | None, rolling: bool, compaction: bool) -> None:
    block = {} if enabled is None else {"enabled": enabled}
    default = resolve(load_config(block)).default
    assert default.rolling_enabled is rolling
    assert default.active is compaction  # the post-compaction guard runs whenever anything does


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"warningThreshold": 25}, (25, 26, 30)),
        ({"warningThreshold": 30}, (30, 31, 32)),
        ({"criticalThreshold": 10}, (10, 11, 30)),
        ({"globalCircuitBreakerThreshold": 5}, (10, 20, 21)),
    ],
)
def test_threshold_order_is_normalised(
    given: dict[str, int], expected: tuple[int, int, int]
) -> None:
    default = resolve(load_config(given)).default
    got = (
        default.warning_threshold,
        default.critical_threshold,
        default.global_circuit_breaker_threshold,
    )
    assert got == expected


def test_each_raise_is_logged_once_naming_field_given_and_used(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        LoopGuard({"warningThreshold": 30, "historySize": 40})
    raises = [r.getMessage() for r in caplog.records if "must exceed" in r.getMessage()]
    assert len(raises) == 2
    assert "criticalThreshold 20" in raises[0]
    assert "using 31" in raises[0]
    assert "globalCircuitBreakerThreshold 30" in raises[1]
    assert "using 32" in raises[1]


def test_unknown_tool_threshold_is_never_changed() -> None:
    default = resolve(load_config({"unknownToolThreshold": 50, "warningThreshold": 60})).default
    assert default.unknown_tool_threshold == 50
    assert default.warning_threshold == 60


def test_per_agent_merge_is_one_level_deep_and_normalised_after() -> None:
    config = {
        "tools": {
            "loopDetection": {
                "enabled": True,
                "detectors": {"pingPong": False},
                "postCompactionGuard": {"windowSize": 5},
            }
        },
        "agents": {
            "list": [
                {
                    "id": "a",
                    "tools": {
                        "loopDetection": {
                            "detectors": {"genericRepeat": False},
                            "warningThreshold": 25,
                        }
                    },
                }
            ]
        },
    }
    agent = resolve(load_config(config)).for_agent("a")
    assert agent.ping_pong is False
    assert agent.generic_repeat is False
    assert agent.compaction_window_size == 5
    assert (
        agent.warning_threshold,
        agent.critical_threshold,
        agent.global_circuit_breaker_threshold,
    ) == (25, 26, 30)


def test_an_agents_enabled_false_wins() -> None:
    config = {
        "tools": {"loopDetection": {"enabled": True}},
        "agents": {"list": [{"id": "quiet", "tools": {"loopDetection": {"enabled": False}}}]},
    }
    settings = resolve(load_config(config))
    assert settings.for_agent("quiet").active is False
    assert settings.for_agent("someone").rolling_enabled is True


def test_per_agent_resolution_is_computed_once() -> None:
    settings = resolve(load_config(SEED))
    assert settings.for_agent("safe-runner") is settings.for_agent("safe-runner")
    assert settings.for_agent(None) is settings.for_agent("not-listed")


# -- bad configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "path", "given"),
    [
        ({"historySize": 0}, "historySize", "0"),
        ({"warningThreshold": -3}, "warningThreshold", "-3"),
        ({"criticalThreshold": 2.5}, "criticalThreshold", "2.5"),
        ({"unknownToolThreshold": "10"}, "unknownToolThreshold", "'10'"),
        ({"globalCircuitBreakerThreshold": True}, "globalCircuitBreakerThreshold", "True"),
        ({"postCompactionGuard": {"windowSize": 0}}, "postCompactionGuard.windowSize", "0"),
    ],
)
def test_bad_counts_are_refused_naming_path_value_and_what_is_allowed(
    block: dict[str, object], path: str, given: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(block)
    message = str(info.value)
    assert f"loopDetection.{path}" in message
    assert given in message
    assert "integer >= 1" in message


def test_a_typo_is_an_unknown_key_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"tools": {"loopDetection": {"histroySize": 30}}})
    message = str(info.value)
    assert "tools.loopDetection.histroySize" in message
    assert "unknown key" in message
    assert "historySize" in message


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"enabled": "yes"}, "loopDetection.enabled: got 'yes'; allowed: true or false"),
        ({"detectors": {"pingPong": 1}}, "loopDetection.detectors.pingPong"),
        ({"detectors": True}, "loopDetection.detectors: got True; allowed: a mapping"),
        ({"scope": "planet"}, "loopDetection.scope"),
        ({"agents": {"list": [{"tools": {}}]}}, "agents.list.0.id"),
        (
            {"agents": {"list": [{"id": "a", "tools": {"loopDetection": {"scope": "trace"}}}]}},
            "only be set in the global",
        ),
    ],
)
def test_wrong_types_are_refused_with_the_path(config: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("suffix", "text", "line"),
    [
        (".json", '{\n  "enabled": true,\n  "historySize": \n}', "line 4"),
        (".json5", "{\n  enabled: true,\n  historySize: ,\n}", "line 3"),
        (".yaml", "enabled: true\nhistorySize: [1,\n", "line 3"),
        (".toml", "enabled = true\nhistorySize = \n", "line 2"),
    ],
)
def test_a_file_that_does_not_parse_says_which_line(
    tmp_path: Path, suffix: str, text: str, line: str
) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert line in str(info.value)


def test_a_missing_file_is_an_error_not_the_defaults(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_a_file_named_by_the_environment_that_cannot_be_used_is_warned_about_and_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_CONFIG", str(tmp_path / "absent.json"))
    monkeypatch.setenv("OTEL_LOOPGUARD_ENABLED", "true")
    with pytest.warns(ConfigWarning, match=r"OTEL_LOOPGUARD_CONFIG: .*absent\.json.*not found"):
        guard = LoopGuard()
    assert guard.settings.default.rolling_enabled is True  # the variables still apply


def test_values_in_a_file_are_validated_like_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("tools:\n  loopDetection:\n    warningThreshold: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "tools.loopDetection.warningThreshold: got 0" in str(info.value)


def test_an_unknown_file_type_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.ini"
    path.write_text("[x]")
    with pytest.raises(ConfigError, match=r"\.json, \.json5, \.yaml, \.yml, \.toml"):
        load_config(path)


def test_a_configuration_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(42)  # type: ignore[arg-type]  # the point is the wrong type


@pytest.mark.parametrize(
    ("module", "suffix", "command"),
    [("yaml", ".yaml", "pip install PyYAML"), ("json5", ".json5", "pip install json5")],
)
def test_a_missing_parser_names_the_pip_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, suffix: str, command: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    path = tmp_path / f"c{suffix}"
    path.write_text("{}")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).endswith(command)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"agents": {"list": [{"tools": {}}]}}, "agents.list.0.id: missing; required"),
        ({"agents": {"list": [{"id": "a"}, {"id": "a"}]}}, "agents: agent id 'a' is listed twice"),
        ({"scope": "planet"}, "loopDetection.scope: got 'planet'; must be 'trace', "),
        ({"abortAfterCriticals": -1}, "got -1; allowed: an integer >= 0"),
        (
            {"tools": {"loopDetection": {"windowSize": 3}}},
            "'windowSize' is not allowed here; it belongs in postCompactionGuard",
        ),
        (
            {"loopDetection": {}, "agents": {}},
            "'loopDetection' is not allowed here; it belongs in tools",
        ),
    ],
)
def test_errors_speak_the_users_language(config: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(config)
    text = str(info.value)
    assert message in text
    for pydantic_words in ("Field required", "Value error", "NoneType", "did you mean 'loopD"):
        assert pydantic_words not in text


def test_a_top_level_loop_detection_block_is_accepted() -> None:
    config = load_config({"loopDetection": {"enabled": True, "warningThreshold": 4}})
    assert resolve(config).default.warning_threshold == 4
    assert resolve(config).default.rolling_enabled is True


def test_an_empty_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_config(path)
