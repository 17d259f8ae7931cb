"""docs/coding-agents.md's Claude Code set-up as a user follows it: the command that merges the
guard's hooks into an existing settings file, the systemd user service that keeps ``serve``
running, and the doctor's check, all pointing at the one address."""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "coding-agents.md").read_text()
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE, flags=re.DOTALL)


(MERGE,) = [b for b in _blocks("bash") if "~/.claude/settings.json" in b]
(UNIT,) = _blocks("ini")
DOCUMENTED = json.loads(next(b for b in _blocks("json") if '"PreCompact"' in b))
"""The settings block the page shows for a fresh settings file."""
HOOK_URL = DOCUMENTED["hooks"]["PreToolUse"][0]["hooks"][0]["url"]


def _merge(home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    return subprocess.run(
        ["bash", "-c", MERGE], capture_output=True, text=True, env=env, timeout=60, check=False
    )


EXISTING: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/audit.sh"}]}
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def test_the_merge_keeps_every_existing_hook_and_setting_and_adds_the_guards(
    tmp_path: Path,
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps(EXISTING, indent=4)
    settings.write_text(original)
    done = _merge(tmp_path)
    assert done.returncode == 0, done.stderr
    merged = json.loads(settings.read_text())
    assert merged["model"] == "opus"
    assert merged["permissions"] == {"allow": ["Bash(git status)"]}
    assert merged["hooks"]["Notification"] == EXISTING["hooks"]["Notification"]
    # The existing PreToolUse group first, the guard's after it; every other event as the page
    # shows it for a fresh file.
    assert merged["hooks"]["PreToolUse"] == [
        EXISTING["hooks"]["PreToolUse"][0],
        *DOCUMENTED["hooks"]["PreToolUse"],
    ]
    for event, groups in DOCUMENTED["hooks"].items():
        if event != "PreToolUse":
            assert merged["hooks"][event] == groups, event
    assert set(merged["hooks"]) == {*DOCUMENTED["hooks"], "Notification"}
    assert (tmp_path / ".claude" / "settings.json.bak").read_text() == original


def test_the_merge_run_twice_adds_the_hooks_once(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(EXISTING))
    assert _merge(tmp_path).returncode == 0
    once = json.loads(settings.read_text())
    assert _merge(tmp_path).returncode == 0
    assert json.loads(settings.read_text()) == once


def test_the_merge_without_a_settings_file_writes_the_documented_block(tmp_path: Path) -> None:
    done = _merge(tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / ".claude" / "settings.json").read_text()) == DOCUMENTED
    assert not (tmp_path / ".claude" / "settings.json.bak").exists()


class _Unit(configparser.ConfigParser):
    """A systemd unit's sections: its keys are case-sensitive."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


def test_the_service_unit_runs_serve_from_the_readmes_clone_where_the_hooks_post() -> None:
    unit = _Unit(interpolation=None)
    unit.read_string(UNIT)
    assert unit.sections() == ["Unit", "Service", "Install"]
    assert unit["Service"]["Restart"] == "on-failure"
    assert unit["Install"]["WantedBy"] == "default.target"  # a user unit: started at login
    command = shlex.split(unit["Service"]["ExecStart"])
    clone = re.search(r"git clone \S+ (\S+) && cd \1", README)
    venv = re.search(r"python3 -m venv (\S+)", README)
    assert clone is not None
    assert venv is not None
    assert command[0] == f"%h/{clone.group(1)}/{venv.group(1)}/bin/otel-loopguard"
    assert command[1] == "serve"
    listen = command[command.index("--listen") + 1]
    assert f"http://{listen}/v1/hooks/claude-code" == HOOK_URL


def test_the_check_the_page_gives_asks_the_address_the_hooks_post_to() -> None:
    server = HOOK_URL.removesuffix("/v1/hooks/claude-code")
    assert f"otel-loopguard doctor --server {server}\n" in PAGE
    assert "systemctl --user enable --now otel-loopguard.service" in PAGE
