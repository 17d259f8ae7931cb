"""Productive agent sessions, scripted call by call: what a loop detector must never stop.

Each session is one agent run that gets its work done: a rename across a package with the tests
run after every file, a fix applied file by file, pagination, polls that end, a customer served
over many turns, a script rewritten until it works. Each is a deterministic list of tool calls
(tool, arguments, the result the tool returned or the error it failed with), the model's
replies that call no tool (answers to the user), and the user's turns; no clock, no randomness.

``tests/test_productive_sessions.py`` drives them through a real span processor and through the
replay engine, under the default configuration (``{"enabled": True}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["SESSIONS", "Reply", "Session", "Step", "User"]


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call and what came of it: the text the tool returned, or the error it failed
    with (its span's status; ``result`` then holds what the tool printed, if anything)."""

    tool: str
    args: Mapping[str, object]
    result: str | None
    error: str | None = None
    batched: bool = False
    """Asked for in the same model response as the step before it (parallel tool calls)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A model reply that calls no tool: an answer or a question to the user."""

    text: str


@dataclass(frozen=True, slots=True)
class User:
    """The user's turn (no span: it reaches the model in its next request)."""

    text: str


Item = Step | Reply | User


@dataclass(frozen=True, slots=True)
class Session:
    name: str
    agent: str
    model: str
    what: str
    items: tuple[Item, ...]

    @property
    def steps(self) -> list[Step | Reply]:
        """The agent's steps: its tool calls and its replies without one."""
        return [item for item in self.items if not isinstance(item, User)]

    @property
    def calls(self) -> list[Step]:
        return [item for item in self.items if isinstance(item, Step)]


def _text(result: object) -> str | None:
    if result is None or isinstance(result, str):
        return result
    return json.dumps(result)


class Script:
    """A session written step by step."""

    def __init__(
        self, name: str, agent: str, model: str, what: str, *, shell: str = "bash"
    ) -> None:
        self.name, self.agent, self.model, self.what = name, agent, model, what
        self.shell = shell
        self.items: list[Item] = []

    def call(
        self,
        tool: str,
        args: Mapping[str, object],
        result: object = "",
        *,
        error: str | None = None,
        batched: bool = False,
    ) -> None:
        self.items.append(Step(tool, dict(args), _text(result), error, batched))

    def sh(self, command: str, output: str = "", *, error: str | None = None) -> None:
        """A command run by the session's shell tool (``{"command": ...}``)."""
        self.call(self.shell, {"command": command}, output, error=error)

    def reply(self, text: str) -> None:
        self.items.append(Reply(text))

    def user(self, text: str) -> None:
        self.items.append(User(text))

    def session(self) -> Session:
        return Session(self.name, self.agent, self.model, self.what, tuple(self.items))


# -- what tools print -----------------------------------------------------------------------------


def secs(n: int, base: float = 0.42, spread: int = 9) -> str:
    """A duration that changes from run to run: ``0.42s``, ``0.47s``, ``0.39s``..."""
    delta = (n * 37 % spread) - spread // 2
    return f"{base + delta / 100:.2f}s"


def pytest_q(passed: int, n: int, *, base: float = 0.42, spread: int = 9, warnings: int = 0) -> str:
    """``pytest -q``'s summary of a green run."""
    rows = []
    left = passed
    while left > 0:
        dots = min(left, 72)
        done = 100 * (passed - left + dots) // passed
        rows.append(f"{'.' * dots:<73}[{done:>3}%]")
        left -= dots
    tail = f", {warnings} warning{'s' if warnings > 1 else ''}" if warnings else ""
    return "\n".join(rows) + f"\n{passed} passed{tail} in {secs(n, base, spread)}"


def numbered(lines: Sequence[str], start: int = 1) -> str:
    """A file's lines as ``cat -n`` (and Claude Code's Read) shows them."""
    return "\n".join(f"{start + i:>6}\t{line}" for i, line in enumerate(lines))


def arrowed(lines: Sequence[str], start: int = 1) -> str:
    """A file's lines as Claude Code's Read tool returns them."""
    return "\n".join(f"{start + i:>6}→{line}" for i, line in enumerate(lines))


def rows(header: Sequence[str], body: Iterable[Sequence[object]]) -> str:
    """A query result as a psql-like table."""
    table = [list(map(str, header)), *([str(v) for v in row] for row in body)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(table[0]))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in table[1:]]
    lines.append(f"({len(table) - 1} row{'s' if len(table) != 2 else ''})")
    return "\n".join(lines)


Builder = Callable[[], Session]


# -- 1. a green rename refactor: sed on each module, the suite run after each ---------------------


def sed_rename_refactor() -> Session:
    s = Script(
        "sed-rename-refactor",
        "mini-swe-agent",
        "gemini-3-pro",
        "get_cfg renamed load_config module by module with sed -i, pytest -q green after each",
    )
    modules = [f"pkg/mod_{n}.py" for n in range(1, 13)]
    s.sh("ls", "CHANGELOG.md\nREADME.md\ndocs\npkg\npyproject.toml\ntests")
    s.sh("ls pkg", "__init__.py\n" + "\n".join(m.split("/")[1] for m in modules))
    hits = [
        f"./{m}:{line}:    cfg = get_cfg({arg})"
        for m, line, arg in zip(
            modules,
            [14, 8, 31, 22, 9, 47, 12, 5, 63, 18, 27, 40],
            ["", "path", "", "env='prod'", "", "path", "", "", "strict=True", "", "path", ""],
            strict=True,
        )
    ]
    hits.append("./pkg/__init__.py:3:from .config import get_cfg")
    hits.append("./tests/test_config.py:6:from pkg import get_cfg")
    s.sh("grep -rn 'get_cfg' --include='*.py' . | head -40", "\n".join(hits))
    s.sh("python -m pytest -q", pytest_q(58, 0))
    s.sh(
        "sed -n '1,24p' pkg/mod_1.py",
        '"""Report rendering."""\n\nfrom .config import get_cfg\nfrom .render import Table\n\n\n'
        "def render(rows):\n    cfg = get_cfg()\n    table = Table(cfg.columns)\n"
        "    for row in rows:\n        table.add(row)\n    return table.to_text()",
    )
    s.sh(
        "grep -n 'def get_cfg' -A6 pkg/config.py",
        "11:def get_cfg(path=None, env=None, strict=False):\n"
        "12-    path = path or os.environ.get('PKG_CONFIG', 'pkg.toml')\n"
        "13-    with open(path, 'rb') as f:\n14-        data = tomllib.load(f)\n"
        "15-    return Config.from_mapping(data, env=env, strict=strict)",
    )
    s.sh("sed -i 's/def get_cfg(/def load_config(/' pkg/config.py")
    s.sh("sed -i 's/import get_cfg/import load_config/' pkg/__init__.py")
    for n, module in enumerate(modules, start=1):
        s.sh(f"sed -i 's/get_cfg/load_config/g' {module}")
        s.sh("python -m pytest -q", pytest_q(58, n))
    s.sh("sed -i 's/get_cfg/load_config/g' tests/test_config.py")
    s.sh("python -m pytest -q", pytest_q(58, 13))
    s.sh("grep -rn 'get_cfg' --include='*.py' .")
    s.sh(
        "grep -rn 'get_cfg' docs README.md CHANGELOG.md",
        "docs/usage.md:17:    cfg = get_cfg('pkg.toml')\nREADME.md:42:`get_cfg()` reads pkg.toml\n"
        "CHANGELOG.md:12:- get_cfg() now caches its result per path",
    )
    s.sh("sed -i 's/get_cfg/load_config/g' docs/usage.md README.md")
    s.sh(
        "sed -n '1,8p' CHANGELOG.md", "# Changelog\n\n## Unreleased\n\n## 2.3.0\n\n- Faster render"
    )
    s.sh(
        "sed -i '4i - Renamed get_cfg() to load_config(); get_cfg stays as a deprecated alias.' "
        "CHANGELOG.md"
    )
    s.sh(
        "cat >> pkg/__init__.py <<'EOF'\n\n\ndef get_cfg(*args, **kwargs):\n"
        "    import warnings\n\n    warnings.warn(\n"
        '        "get_cfg is deprecated; use load_config", DeprecationWarning, stacklevel=2\n'
        "    )\n    return load_config(*args, **kwargs)\nEOF"
    )
    s.sh("python -m pytest -q", pytest_q(58, 14))
    s.sh(
        "python -W error -c 'import pkg; pkg.get_cfg(\"tests/data/pkg.toml\")'",
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
        '  File "/repo/pkg/__init__.py", line 9, in get_cfg\n    warnings.warn(\n'
        "DeprecationWarning: get_cfg is deprecated; use load_config",
    )
    s.sh("ruff check pkg tests", "All checks passed!")
    s.sh(
        "git diff --stat",
        " CHANGELOG.md       |  1 +\n README.md          |  2 +-\n docs/usage.md      |  2 +-\n"
        " pkg/__init__.py    | 10 +++++++++-\n pkg/config.py      |  2 +-\n"
        + "".join(f" {m:<18} |  2 +-\n" for m in modules)
        + " tests/test_config.py |  4 ++--\n 18 files changed, 33 insertions(+), 15 deletions(-)",
    )
    s.sh(
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached | head -20",
        "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/CHANGELOG.md b/CHANGELOG.md\n"
        "index 3b1c2f0..9e8d7a1 100644\n--- a/CHANGELOG.md\n+++ b/CHANGELOG.md\n@@ -1,6 +1,7 @@",
    )
    return s.session()


# -- 2. the same rename by Claude Code's editing tools (Edit, MultiEdit, Write) --------------------

TODOS_DONE = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list to "
    "track your progress. Please proceed with the current tasks if applicable"
)


def todo_write(s: Script, todos: Sequence[tuple[str, str]]) -> None:
    """Claude Code's TodoWrite: the whole list, each item with its status."""
    items = [
        {"content": content, "status": status, "activeForm": _active(content)}
        for content, status in todos
    ]
    s.call("TodoWrite", {"todos": items}, TODOS_DONE)


def _active(content: str) -> str:
    verb, _, rest = content.partition(" ")
    stem = verb[:-1] if verb.endswith("e") else verb
    return f"{stem}ing {rest}"


def edited(path: str, snippet: Sequence[str], start: int) -> str:
    return (
        f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet "
        f"of the edited file:\n{arrowed(snippet, start)}"
    )


def claude_edit_rename() -> Session:
    s = Script(
        "claude-edit-rename",
        "claude-code",
        "claude-sonnet-4-5",
        "fetch_user renamed get_user with Edit, MultiEdit and Write, the suite run after each file",
        shell="Bash",
    )
    root = "/home/dev/app"
    s.user("Rename fetch_user to get_user across the codebase. Keep a deprecated alias.")
    plan = [
        "Find every use of fetch_user",
        "Rename the definition and its callers",
        "Add a deprecated fetch_user alias",
        "Run the tests and the linter",
    ]
    todo_write(s, [(plan[0], "in_progress"), *((p, "pending") for p in plan[1:])])
    files = [
        ("src/app/users/service.py", 41, "def fetch_user(user_id: int) -> User:"),
        ("src/app/users/api.py", 18, "    user = fetch_user(user_id)"),
        ("src/app/orders/checkout.py", 73, "    buyer = fetch_user(order.buyer_id)"),
        ("src/app/orders/refunds.py", 29, "    owner = fetch_user(refund.owner_id)"),
        ("src/app/admin/views.py", 112, "        user = fetch_user(int(request.args['id']))"),
        ("src/app/notifications/email.py", 56, "    recipient = fetch_user(event.user_id)"),
        ("src/app/reports/monthly.py", 88, "        author = fetch_user(row.author_id)"),
        ("src/app/auth/session.py", 34, "    return fetch_user(claims['sub'])"),
        ("src/app/billing/invoices.py", 61, "    customer = fetch_user(invoice.customer_id)"),
        ("src/app/search/indexer.py", 102, "        doc['owner'] = fetch_user(item.owner_id).name"),
    ]
    s.call(
        "Grep",
        {"pattern": "fetch_user", "output_mode": "files_with_matches"},
        f"Found {len(files) + 2} files\n"
        + "\n".join(f"{root}/{f}" for f, _, _ in files)
        + f"\n{root}/tests/test_users.py\n{root}/tests/test_checkout.py",
    )
    s.call(
        "Grep",
        {"pattern": "fetch_user", "output_mode": "content", "-n": True, "path": "src"},
        "\n".join(f"{root}/{f}:{line}:{text.strip()}" for f, line, text in files),
        batched=True,
    )
    s.call(
        "Bash",
        {"command": "uv run pytest -q", "description": "Run the tests first"},
        pytest_q(112, 0, base=1.84),
    )
    todo_write(
        s, [(plan[0], "completed"), (plan[1], "in_progress"), *((p, "pending") for p in plan[2:])]
    )
    for n, (path, line, text) in enumerate(files, start=1):
        full = f"{root}/{path}"
        before = [f"# {path}", "", text, "    ..."]
        s.call(
            "Read",
            {"file_path": full, "offset": max(1, line - 10), "limit": 30},
            arrowed(before * 3, max(1, line - 10)),
        )
        new = text.replace("fetch_user", "get_user")
        if n in (3, 7):
            # Two uses in one file: an import as well.
            s.call(
                "MultiEdit",
                {
                    "file_path": full,
                    "edits": [
                        {
                            "old_string": "from app.users.service import fetch_user",
                            "new_string": "from app.users.service import get_user",
                        },
                        {"old_string": text, "new_string": new},
                    ],
                },
                f"Applied 2 edits to {full}:\n"
                '1. Replaced "from app.users.service import fetch_user" with '
                '"from app.users.service import get_user"\n'
                f'2. Replaced "{text.strip()}" with "{new.strip()}"',
            )
        elif n in (5, 9):
            s.call(
                "Edit",
                {
                    "file_path": full,
                    "old_string": "fetch_user",
                    "new_string": "get_user",
                    "replace_all": True,
                },
                f"The file {full} has been updated. All occurrences of 'fetch_user' were "
                "successfully replaced with 'get_user'.",
            )
        else:
            s.call(
                "Edit",
                {"file_path": full, "old_string": text, "new_string": new},
                edited(
                    full, [new, "    if user is None:", "        raise NotFound(user_id)"], line
                ),
            )
        s.call(
            "Bash",
            {"command": "uv run pytest -q", "description": "Run the test suite"},
            pytest_q(112, n, base=1.84, spread=23),
        )
    todo_write(
        s,
        [
            (plan[0], "completed"),
            (plan[1], "completed"),
            (plan[2], "in_progress"),
            (plan[3], "pending"),
        ],
    )
    compat = f"{root}/src/app/users/compat.py"
    s.call(
        "Write",
        {
            "file_path": compat,
            "content": '"""Names kept for callers outside this repository."""\n\nimport warnings\n'
            "\n"
            "from .service import get_user\n\n\ndef fetch_user(user_id: int):\n"
            '    warnings.warn("fetch_user is deprecated; use get_user", DeprecationWarning, '
            "stacklevel=2)\n    return get_user(user_id)\n",
        },
        f"File created successfully at: {compat}",
    )
    s.call(
        "Read",
        {"file_path": f"{root}/src/app/users/__init__.py"},
        arrowed(
            [
                "from .service import fetch_user, list_users",
                "",
                '__all__ = ["fetch_user", "list_users"]',
            ]
        ),
    )
    s.call(
        "Write",
        {
            "file_path": f"{root}/src/app/users/__init__.py",
            "content": "from .compat import fetch_user\nfrom .service import get_user, list_users\n"
            "\n"
            '__all__ = ["fetch_user", "get_user", "list_users"]\n',
        },
        f"The file {root}/src/app/users/__init__.py has been updated. Here's the result of "
        "running `cat -n` on a snippet of the edited file:\n"
        + arrowed(["from .compat import fetch_user", "from .service import get_user, list_users"]),
    )
    s.call(
        "MultiEdit",
        {
            "file_path": f"{root}/tests/test_users.py",
            "edits": [
                {"old_string": "fetch_user", "new_string": "get_user", "replace_all": True},
                {
                    "old_string": "def test_get_user_missing():",
                    "new_string": "def test_fetch_user_is_deprecated():\n"
                    "    with pytest.deprecated_call():\n        fetch_user(1)\n\n\n"
                    "def test_get_user_missing():",
                },
            ],
        },
        f'Applied 2 edits to {root}/tests/test_users.py:\n1. Replaced "fetch_user" with '
        '"get_user"\n2. Replaced "def test_get_user_missing():" with "def '
        'test_fetch_user_is_deprecated():..."',
    )
    s.call(
        "Bash",
        {"command": "uv run pytest -q", "description": "Run the test suite"},
        pytest_q(113, 11, base=1.84, spread=23),
    )
    s.call(
        "Grep",
        {"pattern": "fetch_user", "output_mode": "files_with_matches"},
        f"Found 3 files\n{root}/src/app/users/compat.py\n{root}/src/app/users/__init__.py\n"
        f"{root}/tests/test_users.py",
    )
    s.call(
        "Edit",
        {
            "file_path": f"{root}/tests/test_checkout.py",
            "old_string": "@patch('app.orders.checkout.fetch_user')",
            "new_string": "@patch('app.orders.checkout.get_user')",
        },
        edited(f"{root}/tests/test_checkout.py", ["@patch('app.orders.checkout.get_user')"], 22),
    )
    todo_write(s, [*((p, "completed") for p in plan[:3]), (plan[3], "in_progress")])
    s.call(
        "Bash",
        {
            "command": "uv run pytest -q && uv run ruff check src tests",
            "description": "Tests and lint",
        },
        pytest_q(113, 12, base=1.84, spread=23) + "\nAll checks passed!",
    )
    s.call(
        "Bash",
        {"command": "git status --short", "description": "Show changed files"},
        "\n".join(f" M {f}" for f, _, _ in files)
        + "\n M src/app/users/__init__.py\n M tests/test_checkout.py\n M tests/test_users.py\n"
        "?? src/app/users/compat.py",
    )
    todo_write(s, [(p, "completed") for p in plan])
    s.reply(
        "Renamed `fetch_user` to `get_user` in 10 modules and the tests. `app.users.fetch_user` "
        "still works and warns with a DeprecationWarning (new test). 113 tests pass, ruff is clean."
    )
    return s.session()


# -- 3. one fix applied file by file: tests/test_api_v1.py .. test_api_v12.py ----------------------


def api_fix_file_by_file() -> Session:
    s = Script(
        "api-fix-file-by-file",
        "swe-agent",
        "gpt-4.1",
        "one sed script applied to test_api_v1..v12, each file's tests run after it",
    )
    counts = [6, 9, 5, 11, 7, 7, 8, 4, 12, 6, 10, 9]
    s.sh(
        "ls tests",
        "\n".join(["conftest.py", *(f"test_api_v{n}.py" for n in range(1, 13)), "test_client.py"]),
    )
    s.sh(
        "python -m pytest tests -q -x 2>&1 | tail -15",
        "F\n=================================== FAILURES ===================================\n"
        "_______________________________ test_list_users ________________________________\n\n"
        "    def test_list_users(client):\n        resp = client.get('/v1/users')\n"
        ">       users = resp.json()[\"data\"]\nE       KeyError: 'data'\n\n"
        "tests/test_api_v1.py:14: KeyError\n=========================== short test summary info "
        "============================\nFAILED tests/test_api_v1.py::test_list_users - KeyError: "
        "'data'\n!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
        "1 failed in 0.31s",
    )
    s.sh(
        "git log -3 --format='%h %s' -- src/api",
        "9c1e4d2 api: paginated responses carry their payload under 'items' (was 'data')\n"
        "41b7a90 api: v12 endpoints for audit events\n0d3f6e1 api: share the pagination helper",
    )
    s.sh(
        "sed -n '1,30p' tests/test_api_v1.py",
        "import pytest\n\nfrom tests.conftest import make_users\n\n\n@pytest.fixture\ndef "
        "client(app):\n"
        "    return app.test_client()\n\n\ndef test_list_users(client):\n"
        "    make_users(3)\n    resp = client.get('/v1/users')\n"
        '    users = resp.json()["data"]\n    assert len(users) == 3\n',
    )
    s.sh(
        "grep -n 'def paginate' -A12 src/api/pagination.py",
        "8:def paginate(query, page, per_page):\n9-    items = query.limit(per_page).offset((page "
        "- 1) * per_page).all()\n"
        "10-    return {\n11-        'items': [i.to_dict() for i in items],\n12-        'page': "
        "page,\n"
        "13-        'per_page': per_page,\n14-        'total': query.count(),\n15-    }",
    )
    s.sh(
        "grep -rlF 'resp.json()[\"data\"]' tests | sort -V",
        "\n".join(f"tests/test_api_v{n}.py" for n in range(1, 13)),
    )
    s.sh(
        "grep -rcF 'resp.json()[\"data\"]' tests | sort -V",
        "\n".join(f"tests/test_api_v{n}.py:{c // 2 + 1}" for n, c in enumerate(counts, start=1))
        + "\ntests/conftest.py:0\ntests/test_client.py:0",
    )
    s.sh(
        "python -m pytest tests/test_api_v1.py -q",
        "F.....                                                                   [100%]\n"
        "FAILED tests/test_api_v1.py::test_list_users - KeyError: 'data'\n1 failed, 5 passed in "
        "0.19s",
    )
    s.sh(
        "sed -n '1,25p' tests/conftest.py",
        "import pytest\n\nfrom api import create_app\n\n\n@pytest.fixture\ndef app():\n"
        "    app = create_app({'TESTING': True, 'DATABASE': ':memory:'})\n    yield app\n",
    )
    script = 's/resp\\.json()\\["data"\\]/resp.json()["items"]/g'
    for n, count in enumerate(counts, start=1):
        path = f"tests/test_api_v{n}.py"
        s.sh(f"sed -i '{script}' {path}")
        s.sh(f"python -m pytest {path} -q", pytest_q(count, n, base=0.18, spread=13))
    s.sh("grep -rnF 'json()[\"data\"]' tests src")
    s.sh("python -m pytest tests -q", pytest_q(sum(counts) + 14, 20, base=2.61, spread=31))
    s.sh("flake8 tests", "")
    s.sh(
        "grep -rn '\\[\"data\"\\]' docs README.md",
        'docs/api.md:31:    users = requests.get(url).json()["data"]',
    )
    s.sh('sed -i \'s/json()\\["data"\\]/json()["items"]/\' docs/api.md')
    s.sh(
        "git diff --stat",
        "".join(
            f" tests/test_api_v{n}.py | {2 * (c // 2 + 1)} +-\n"
            for n, c in enumerate(counts, start=1)
        )
        + " 12 files changed, 48 insertions(+), 48 deletions(-)",
    )
    s.sh(
        "git diff tests/test_api_v12.py",
        "diff --git a/tests/test_api_v12.py b/tests/test_api_v12.py\n@@ -20,7 +20,7 @@ def "
        "test_audit_events(client):\n"
        "     resp = client.get('/v12/audit')\n-    events = resp.json()[\"data\"]\n+    events = "
        'resp.json()["items"]',
    )
    s.sh("submit", "Submitted: 12 files changed")
    return s.session()


# -- 4. edits that print nothing, or "The file has been updated.", between passing test runs ------


def quiet_edits_green_tests() -> Session:
    s = Script(
        "quiet-edits-green-tests",
        "aider-like",
        "deepseek-v3",
        "type hints added handler by handler: edits answer '' or 'The file has been updated.'",
    )
    handlers = [
        ("orders", 14),
        ("payments", 9),
        ("refunds", 6),
        ("shipments", 11),
        ("invoices", 8),
        ("customers", 12),
        ("coupons", 5),
        ("webhooks", 7),
        ("inventory", 10),
    ]
    s.call(
        "list_dir",
        {"path": "src/shop/handlers"},
        "\n".join(f"{h}.py" for h, _ in handlers) + "\n__init__.py",
    )
    s.call(
        "run_tests",
        {"target": "tests"},
        "================ 203 passed, 4 warnings in 4.62s ================",
    )
    s.call(
        "run_command",
        {"command": "mypy --strict src/shop/handlers | tail -3"},
        "src/shop/handlers/inventory.py:41: error: Function is missing a return type annotation  "
        "[no-untyped-def]\n"
        "src/shop/handlers/inventory.py:58: error: Function is missing a type annotation  "
        "[no-untyped-def]\n"
        "Found 57 errors in 9 files (checked 10 source files)",
    )
    s.call(
        "read_file",
        {"path": "src/shop/models.py"},
        "from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column\n\n\nclass "
        "Base(DeclarativeBase):\n"
        "    pass\n\n\nclass Order(Base):\n    __tablename__ = 'orders'\n    id: Mapped[int] = "
        "mapped_column(primary_key=True)\n",
    )
    remaining = 57
    for n, (name, tests) in enumerate(handlers, start=1):
        path = f"src/shop/handlers/{name}.py"
        s.call(
            "read_file",
            {"path": path},
            f"from shop.models import {name.title()[:-1]}\n\n\ndef list_{name}(session, "
            f"limit=50):\n"
            f"    return session.query({name.title()[:-1]}).limit(limit).all()\n\n\n"
            f"def get_{name[:-1]}(session, key):\n    return session.get({name.title()[:-1]}, "
            f"key)\n",
        )
        if n % 3 == 0:
            s.call(
                "write_file",
                {
                    "path": path,
                    "content": f"from sqlalchemy.orm import Session\n\nfrom shop.models import "
                    f"{name.title()[:-1]}\n\n\n"
                    f"def list_{name}(session: Session, limit: int = 50) -> "
                    f"list[{name.title()[:-1]}]:\n"
                    f"    return session.query({name.title()[:-1]}).limit(limit).all()\n",
                },
                "The file has been updated.",
            )
        else:
            s.call(
                "edit_file",
                {
                    "path": path,
                    "old": f"def list_{name}(session, limit=50):",
                    "new": f"def list_{name}(session: Session, limit: int = 50) -> "
                    f"list[{name.title()[:-1]}]:",
                },
                "",
            )
        s.call(
            "run_tests",
            {"target": f"tests/handlers/test_{name}.py"},
            f"======== {tests} passed in {secs(n, 0.31, 17)} ========",
        )
        remaining -= [7, 6, 4, 8, 5, 9, 3, 6, 9][n - 1]
        if n % 3 == 0:
            s.call(
                "run_command",
                {"command": "mypy --strict src/shop/handlers | tail -1"},
                f"Found {remaining} errors in {9 - n} files (checked 10 source files)"
                if remaining
                else "Success: no issues found in 10 source files",
            )
    s.call(
        "edit_file",
        {
            "path": "src/shop/handlers/__init__.py",
            "old": "from .orders import *",
            "new": "from .orders import list_orders, get_order",
        },
        "",
    )
    s.call(
        "run_tests",
        {"target": "tests"},
        "================ 203 passed, 4 warnings in 4.71s ================",
    )
    s.call("run_command", {"command": "ruff check src/shop/handlers"}, "All checks passed!")
    s.call(
        "run_command",
        {"command": "mypy --strict src/shop"},
        "Success: no issues found in 23 source files",
    )
    s.call(
        "write_file",
        {"path": "src/shop/handlers/py.typed", "content": ""},
        "The file has been updated.",
    )
    s.call(
        "run_command",
        {"command": "git diff --stat | tail -1"},
        " 11 files changed, 96 insertions(+), 61 deletions(-)",
    )
    s.reply("All nine handler modules are typed; mypy --strict is clean and the 203 tests pass.")
    return s.session()


# -- 5. fix and re-run until green: each failure a new one -----------------------------------------


def _edited_snippet(path: str, lines: Sequence[str], start: int) -> str:
    return (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet "
        f"of {path}:\n{numbered(lines, start)}\nReview the changes and make sure they are as "
        "expected. Edit the file again if necessary."
    )


def fix_rerun_until_green() -> Session:
    s = Script(
        "fix-rerun-until-green",
        "anthropic-quickstart",
        "claude-opus-4-1",
        "three bugs fixed by edit and re-run, every failure a different one, then green",
    )
    ed = "str_replace_based_edit_tool"
    src, tests = "/repo/src/when/dates.py", "/repo/tests/test_dates.py"

    def run(target: str, output: str) -> None:
        s.sh(f"cd /repo && python -m pytest {target} -q 2>&1 | tail -4", output)

    def replace(old: str, new: str, start: int) -> None:
        s.call(
            ed,
            {"command": "str_replace", "path": src, "old_str": old, "new_str": new},
            _edited_snippet(src, new.splitlines(), start),
        )

    s.sh(
        "cd /repo && git status --short && ls src/when tests",
        "src/when:\n__init__.py\ndates.py\nhumanize.py\n\ntests:\ntest_dates.py\ntest_humanize.py",
    )
    s.call(
        ed,
        {"command": "view", "path": "/repo"},
        "Here's the files and directories up to 2 levels deep in /repo:\n"
        "/repo/README.md\n/repo/pyproject.toml\n/repo/src/when\n/repo/src/when/dates.py\n"
        "/repo/src/when/humanize.py\n"
        "/repo/tests/test_dates.py\n/repo/tests/test_humanize.py\n/repo/CHANGELOG.md",
    )
    s.sh(
        "cd /repo && git log --oneline -4",
        "5e0c1d2 humanize: mixed units\n77ab310 dates: week_bounds takes first_day\n"
        "c2d9e48 dates: accept UTC designator\n1f0e9aa initial",
    )
    s.sh(
        "cd /repo && sed -n '1,20p' pyproject.toml",
        '[project]\nname = "when"\nversion = "0.4.0"\n'
        'requires-python = ">=3.10"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]',
    )
    run(
        "tests",
        "FAILED tests/test_dates.py::test_parse_iso_z - ValueError: unconverted data remains: Z\n"
        "FAILED tests/test_humanize.py::test_duration_singular - AssertionError: assert '1 hours' "
        "== '1 hour'\n"
        "FAILED tests/test_dates.py::test_week_bounds_year_end - AssertionError: assert "
        "datetime.date(2024, 12, 23) == datetime.date(2024, 12, 30)\n"
        "3 failed, 41 passed in 0.38s",
    )
    s.call(
        ed,
        {"command": "view", "path": src},
        numbered(
            [
                "from datetime import date, datetime, timedelta, timezone",
                "",
                "ISO = '%Y-%m-%dT%H:%M:%S'",
                "",
                "",
                "def parse_iso(text: str) -> datetime:",
                "    return datetime.strptime(text, ISO)",
                "",
                "",
                "def week_bounds(day: date) -> tuple[date, date]:",
                "    start = day - timedelta(days=day.weekday())",
                "    return start, start + timedelta(days=6)",
            ]
        ),
    )
    # Bug 1: a trailing Z.
    replace(
        "    return datetime.strptime(text, ISO)",
        "    return datetime.strptime(text.rstrip('Z'), ISO)",
        6,
    )
    run(
        "tests/test_dates.py::test_parse_iso_z",
        "E        +  where datetime.datetime(2024, 3, 1, 12, 0) = "
        "parse_iso('2024-03-01T12:00:00Z')\n"
        "FAILED tests/test_dates.py::test_parse_iso_z - AssertionError: assert "
        "datetime.datetime(2024, 3, 1, 12, 0) == datetime.datetime(2024, 3, 1, 12, 0, "
        "tzinfo=datetime.timezone.utc)\n"
        "1 failed in 0.09s",
    )
    s.call(
        ed,
        {"command": "view", "path": tests, "view_range": [1, 30]},
        numbered(
            [
                "from datetime import date, datetime, timezone",
                "",
                "from when.dates import parse_iso, week_bounds",
                "",
                "",
                "def test_parse_iso_z():",
                "    assert parse_iso('2024-03-01T12:00:00Z') == datetime(2024, 3, 1, 12, "
                "tzinfo=timezone.utc)",
                "",
                "",
                "def test_parse_naive():",
                "    assert parse_iso('2024-03-01T12:00:00') == datetime(2024, 3, 1, 12)",
            ]
        ),
    )
    replace(
        "    return datetime.strptime(text.rstrip('Z'), ISO)",
        "    return datetime.strptime(text.rstrip('Z'), ISO).replace(tzinfo=timezone.utc)",
        6,
    )
    run(
        "tests/test_dates.py",
        "FAILED tests/test_dates.py::test_parse_naive - AssertionError: assert "
        "datetime.datetime(2024, 3, 1, 12, 0, tzinfo=datetime.timezone.utc) == "
        "datetime.datetime(2024, 3, 1, 12, 0)\n"
        "FAILED tests/test_dates.py::test_week_bounds_year_end - AssertionError: assert "
        "datetime.date(2024, 12, 23) == datetime.date(2024, 12, 30)\n"
        "2 failed, 20 passed in 0.14s",
    )
    replace(
        "    return datetime.strptime(text.rstrip('Z'), ISO).replace(tzinfo=timezone.utc)",
        "    if text.endswith('Z'):\n        return datetime.strptime(text[:-1], "
        "ISO).replace(tzinfo=timezone.utc)\n"
        "    return datetime.strptime(text, ISO)",
        6,
    )
    run(
        "tests/test_dates.py",
        "FAILED tests/test_dates.py::test_week_bounds_year_end - AssertionError: assert "
        "datetime.date(2024, 12, 23) == datetime.date(2024, 12, 30)\n"
        "1 failed, 21 passed in 0.12s",
    )
    # Bug 2: the week of the year's end.
    s.call(
        ed,
        {"command": "view", "path": tests, "view_range": [40, 62]},
        numbered(
            [
                "def test_week_bounds_year_end():",
                "    start, end = week_bounds(date(2024, 12, 31), first_day='monday')",
                "    assert start == date(2024, 12, 30)",
                "    assert end == date(2025, 1, 5)",
                "",
                "",
                "def test_week_bounds_sunday_start():",
                "    start, end = week_bounds(date(2024, 12, 31), first_day='sunday')",
                "    assert start == date(2024, 12, 29)",
            ],
            40,
        ),
    )
    s.sh(
        "cd /repo && grep -n 'first_day' -r src tests",
        "tests/test_dates.py:41:    start, end = week_bounds(date(2024, 12, 31), "
        "first_day='monday')\n"
        "tests/test_dates.py:47:    start, end = week_bounds(date(2024, 12, 31), "
        "first_day='sunday')",
    )
    replace(
        "def week_bounds(day: date) -> tuple[date, date]:\n    start = day - "
        "timedelta(days=day.weekday())",
        "def week_bounds(day: date, first_day: str = 'monday') -> tuple[date, date]:\n"
        "    offset = day.weekday() if first_day == 'monday' else day.isoweekday()\n    start = "
        "day - timedelta(days=offset)",
        10,
    )
    run(
        "tests/test_dates.py",
        "FAILED tests/test_dates.py::test_week_bounds_year_end - TypeError: unsupported operand "
        "type(s) for -: 'datetime.date' and 'int'\n"
        "FAILED tests/test_dates.py::test_week_bounds_sunday_start - TypeError: unsupported "
        "operand type(s) for -: 'datetime.date' and 'int'\n"
        "2 failed, 20 passed in 0.13s",
    )
    s.call(
        ed,
        {"command": "view", "path": src, "view_range": [10, 20]},
        numbered(
            [
                "def week_bounds(day: date, first_day: str = 'monday') -> tuple[date, date]:",
                "    offset = day.weekday() if first_day == 'monday' else day.isoweekday()",
                "    start = day - timedelta(days=offset)",
                "    return start, start + 6",
            ],
            10,
        ),
    )
    replace("    return start, start + 6", "    return start, start + timedelta(days=6)", 13)
    run(
        "tests/test_dates.py",
        "FAILED tests/test_dates.py::test_week_bounds_sunday_start - AssertionError: assert "
        "datetime.date(2024, 12, 31) == datetime.date(2024, 12, 29)\n"
        "1 failed, 21 passed in 0.11s",
    )
    replace(
        "    offset = day.weekday() if first_day == 'monday' else day.isoweekday()",
        "    offset = day.weekday() if first_day == 'monday' else day.isoweekday() % 7",
        11,
    )
    run("tests/test_dates.py", pytest_q(22, 1, base=0.11))
    # Bug 3: singular units.
    s.call(
        ed,
        {"command": "view", "path": "/repo/src/when/humanize.py"},
        numbered(
            [
                "def duration(seconds: int) -> str:",
                "    if seconds < 60:",
                "        return 'just now'",
                "    minutes = seconds // 60",
                "    if minutes < 60:",
                "        return f'{minutes} minutes'",
                "    hours = minutes // 60",
                "    return f'{hours} hours'",
            ]
        ),
    )
    hum = "/repo/src/when/humanize.py"
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": hum,
            "old_str": "    return f'{hours} hours'",
            "new_str": "    return f'{hours} hour' if hours == 1 else f'{hours} hours'",
        },
        _edited_snippet(hum, ["    return f'{hours} hour' if hours == 1 else f'{hours} hours'"], 8),
    )
    run(
        "tests/test_humanize.py",
        "FAILED tests/test_humanize.py::test_duration_mixed - AssertionError: assert '1 hour' == "
        "'1 hour 30 minutes'\n"
        "1 failed, 21 passed in 0.10s",
    )
    s.call(
        ed,
        {"command": "view", "path": "/repo/tests/test_humanize.py", "view_range": [18, 34]},
        numbered(
            [
                "def test_duration_singular():",
                "    assert duration(3600) == '1 hour'",
                "",
                "",
                "def test_duration_mixed():",
                "    assert duration(5400) == '1 hour 30 minutes'",
                "    assert duration(3660) == '1 hour 1 minute'",
            ],
            18,
        ),
    )
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": hum,
            "old_str": "    hours = minutes // 60\n    return f'{hours} hour' if hours == 1 else "
            "f'{hours} hours'",
            "new_str": "    hours, minutes = divmod(minutes, 60)\n    parts = [_unit(hours, "
            "'hour')]\n"
            "    if minutes:\n        parts.append(_unit(minutes, 'minute'))\n    return ' "
            "'.join(parts)",
        },
        _edited_snippet(
            hum,
            ["    hours, minutes = divmod(minutes, 60)", "    parts = [_unit(hours, 'hour')]"],
            7,
        ),
    )
    run(
        "tests/test_humanize.py",
        "FAILED tests/test_humanize.py::test_duration_singular - NameError: name '_unit' is not "
        "defined\n"
        "FAILED tests/test_humanize.py::test_duration_mixed - NameError: name '_unit' is not "
        "defined\n"
        "2 failed, 20 passed in 0.10s",
    )
    s.call(
        ed,
        {
            "command": "insert",
            "path": hum,
            "insert_line": 0,
            "new_str": "def _unit(n: int, name: str) -> str:\n    return f'{n} {name}' if n == 1 "
            "else f'{n} {name}s'\n\n",
        },
        _edited_snippet(
            hum,
            [
                "def _unit(n: int, name: str) -> str:",
                "    return f'{n} {name}' if n == 1 else f'{n} {name}s'",
            ],
            1,
        ),
    )
    run(
        "tests/test_humanize.py",
        "FAILED tests/test_humanize.py::test_duration_minutes - AssertionError: assert '1 "
        "minutes' == '1 minute'\n"
        "1 failed, 21 passed in 0.09s",
    )
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": hum,
            "old_str": "        return f'{minutes} minutes'",
            "new_str": "        return _unit(minutes, 'minute')",
        },
        _edited_snippet(hum, ["        return _unit(minutes, 'minute')"], 9),
    )
    run("tests/test_humanize.py", pytest_q(22, 2, base=0.09))
    run("tests", pytest_q(44, 3, base=0.36))
    s.call(
        ed,
        {"command": "view", "path": "/repo/CHANGELOG.md", "view_range": [1, 12]},
        numbered(
            [
                "# Changelog",
                "",
                "## Unreleased",
                "",
                "## 0.4.0",
                "",
                "- week_bounds takes first_day",
                "- mixed units in duration()",
            ]
        ),
    )
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": "/repo/CHANGELOG.md",
            "old_str": "## Unreleased\n",
            "new_str": "## Unreleased\n\n- parse_iso keeps a trailing 'Z' as UTC\n- week_bounds: "
            "Sunday-first weeks\n"
            "- duration(): singular units\n",
        },
        _edited_snippet(
            "/repo/CHANGELOG.md",
            ["## Unreleased", "", "- parse_iso keeps a trailing 'Z' as UTC"],
            3,
        ),
    )
    s.sh(
        "cd /repo && python -m pytest -q -p no:cacheprovider --doctest-modules src 2>&1 | tail -2",
        "7 passed in 0.05s",
    )
    s.sh(
        "cd /repo && ruff check src tests && ruff format --check src tests",
        "All checks passed!\n5 files already formatted",
    )
    s.sh("cd /repo && python -m mypy src", "Success: no issues found in 3 source files")
    s.sh(
        "cd /repo && git diff --stat",
        " src/when/dates.py    | 12 ++++++++----\n src/when/humanize.py | 14 ++++++++++----\n 2 "
        "files changed, 18 insertions(+), 8 deletions(-)",
    )
    s.reply(
        "Fixed the three failures (ISO 'Z' suffix, week bounds for a Sunday start, singular "
        "units); all 44 tests pass."
    )
    return s.session()


# -- 6. flaky tests re-run after one edit, passing and failing by turns, then fixed ----------------


def _oh(output: str, code: int = 0) -> str:
    """OpenHands' execute_bash observation."""
    return f"{output}\n[The command completed with exit code {code}.]"


def flaky_test_reruns() -> Session:
    s = Script(
        "flaky-test-reruns",
        "openhands",
        "claude-sonnet-4",
        "two flaky tests re-run after an edit, pass and fail by turns, then fixed for good",
        shell="execute_bash",
    )
    ed = "str_replace_editor"
    pool, tpool = "/workspace/pool/src/pool.py", "/workspace/pool/tests/test_pool.py"
    one = (
        "cd /workspace/pool && python -m pytest tests/test_pool.py::test_shutdown_drains_queue "
        "-q -p no:randomly"
    )

    def bash(command: str, output: str, code: int = 0) -> None:
        s.call("execute_bash", {"command": command, "is_input": "false"}, _oh(output, code))

    def think(thought: str) -> None:
        s.call("think", {"thought": thought}, "Your thought has been logged.")

    def passed(n: int, count: int = 1) -> str:
        return (
            f"{'.' * count:<73}[100%]\n{count} passed in {secs(n, 0.61 if count == 1 else 3.1, 21)}"
        )

    def failed(n: int, got: int) -> str:
        return (
            f"F{' ' * 72}[100%]\nE       assert {got} == 100\nE        +  where {got} = len(done)\n"
            f"FAILED tests/test_pool.py::test_shutdown_drains_queue - assert {got} == 100\n"
            f"1 failed in {secs(n, 0.64, 21)}"
        )

    bash(
        "cd /workspace/pool && git status --short && git log --oneline -1",
        "a41c9e2 pool: graceful shutdown",
    )
    bash(
        "cd /workspace/pool && python -m pytest tests/test_pool.py -q -p no:randomly",
        f"{'.' * 11}F{'.' * 6}{' ' * 55}[100%]\nFAILED tests/test_pool.py::test_shutdown_drains_q"
        f"ueue - assert 97 == 100\n"
        "1 failed, 17 passed in 1.92s",
        1,
    )
    s.call(
        ed,
        {"command": "view", "path": tpool, "view_range": [60, 80]},
        numbered(
            [
                "def test_shutdown_drains_queue():",
                "    done = []",
                "    pool = Pool(workers=4)",
                "    for i in range(100):",
                "        pool.submit(done.append, i)",
                "    pool.shutdown()",
                "    assert len(done) == 100",
            ],
            60,
        ),
    )
    bash(one, passed(1))
    bash(one, failed(2, 98), 1)
    bash(
        "cd /workspace/pool && pip list 2>/dev/null | grep -i -E 'pytest-(repeat|xdist)'",
        "pytest-repeat      0.9.3\npytest-xdist       3.6.1",
    )
    think(
        "Fails about half the time and never by much: some queued tasks are dropped at shutdown. "
        "Look at how shutdown() stops the workers."
    )
    s.call(
        ed,
        {"command": "view", "path": pool, "view_range": [20, 60]},
        numbered(
            [
                "    def submit(self, fn, *args):",
                "        self._queue.put((fn, args))",
                "",
                "    def shutdown(self):",
                "        self._stop.set()",
                "        for worker in self._workers:",
                "            worker.join()",
                "",
                "    def _run(self):",
                "        while not self._stop.is_set():",
                "            try:",
                "                fn, args = self._queue.get(timeout=0.05)",
                "            except Empty:",
                "                continue",
                "            self._queue.task_done()",
                "            fn(*args)",
            ],
            20,
        ),
    )
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": pool,
            "old_str": "    def shutdown(self):\n        self._stop.set()",
            "new_str": "    def shutdown(self):\n        self._queue.join()\n        "
            "self._stop.set()",
        },
        _edited_snippet(
            pool,
            ["    def shutdown(self):", "        self._queue.join()", "        self._stop.set()"],
            23,
        ),
    )
    for n, got in enumerate([0, 99, 0, 98, 0, 0], start=3):
        if got:
            bash(one, failed(n, got), 1)
        else:
            bash(one, passed(n))
    bash(
        f"{one} --count=50 2>&1 | tail -3",
        "FAILED tests/test_pool.py::test_shutdown_drains_queue[12-50] - assert 99 == 100\n"
        "FAILED tests/test_pool.py::test_shutdown_drains_queue[37-50] - assert 98 == 100\n"
        "2 failed, 48 passed in 31.07s",
        1,
    )
    think(
        "Still flaky after join(): task_done() is called before fn runs, so join() returns while "
        "the last tasks are still running and the test counts them too early."
    )
    bash(
        "cd /workspace/pool && grep -n 'task_done\\|def _run\\|join' src/pool.py",
        "24:        self._queue.join()\n30:    def _run(self):\n36:            "
        "self._queue.task_done()\n"
        "45:            worker.join()",
    )
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": pool,
            "old_str": "            self._queue.task_done()\n            fn(*args)",
            "new_str": "            try:\n                fn(*args)\n            finally:\n"
            "                self._queue.task_done()",
        },
        _edited_snippet(
            pool,
            [
                "            try:",
                "                fn(*args)",
                "            finally:",
                "                self._queue.task_done()",
            ],
            36,
        ),
    )
    bash(f"{one} --count=50 2>&1 | tail -1", "50 passed in 30.84s")
    bash(f"{one} --count=300 -x 2>&1 | tail -1", "300 passed in 184.52s (0:03:04)")
    bash(
        "cd /workspace/pool && python -m pytest tests/test_pool.py -q -p no:randomly", passed(9, 18)
    )
    bash(
        "cd /workspace/pool && git diff src/pool.py | head -20",
        "@@ -21,6 +21,7 @@ class Pool:\n     def shutdown(self):\n+        self._queue.join()\n   "
        "      self._stop.set()\n"
        "@@ -33,5 +34,7 @@ class Pool:\n-            self._queue.task_done()\n-            "
        "fn(*args)\n+            try:\n"
        "+                fn(*args)\n+            finally:\n+                "
        "self._queue.task_done()",
    )
    bash("cd /workspace/pool && grep -rn 'time.sleep' tests | wc -l", "3")
    # The second flaky test: a TTL measured with the wall clock.
    ttl = "cd /workspace/pool && python -m pytest tests/test_cache.py::test_entry_expires -q"
    bash(
        "cd /workspace/pool && python -m pytest -q 2>&1 | tail -3",
        "FAILED tests/test_cache.py::test_entry_expires - AssertionError: assert 'v' is None\n"
        "1 failed, 141 passed in 12.40s",
        1,
    )
    bash(
        ttl,
        "F                                                                        [100%]\n"
        "FAILED tests/test_cache.py::test_entry_expires - AssertionError: assert 'v' is None\n1 "
        "failed in 0.13s",
        1,
    )
    bash(ttl, passed(11))
    bash(ttl, passed(12))
    bash(
        ttl,
        "F                                                                        [100%]\n"
        "FAILED tests/test_cache.py::test_entry_expires - AssertionError: assert 'v' is None\n1 "
        "failed in 0.12s",
        1,
    )
    s.call(
        ed,
        {"command": "view", "path": "/workspace/pool/tests/test_cache.py", "view_range": [1, 25]},
        numbered(
            [
                "import time",
                "",
                "from pool.cache import TTLCache",
                "",
                "",
                "def test_entry_expires():",
                "    cache = TTLCache(ttl=0.01)",
                "    cache.set('k', 'v')",
                "    time.sleep(0.01)",
                "    assert cache.get('k') is None",
            ]
        ),
    )
    bash(
        "cd /workspace/pool && grep -n 'monotonic\\|def get\\|def __init__' src/pool/cache.py",
        "8:    def __init__(self, ttl):\n12:        self._expires[key] = time.monotonic() + "
        "self._ttl\n"
        "14:    def get(self, key):\n15:        if time.monotonic() > self._expires.get(key, 0):",
    )
    think(
        "The test sleeps exactly the TTL and compares with '>', so it depends on timer resolution. "
        "Give TTLCache an injectable clock and drive it from the test instead of sleeping."
    )
    cache = "/workspace/pool/src/pool/cache.py"
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": cache,
            "old_str": "    def __init__(self, ttl):",
            "new_str": "    def __init__(self, ttl, clock=time.monotonic):\n        self._clock = "
            "clock",
        },
        _edited_snippet(
            cache,
            ["    def __init__(self, ttl, clock=time.monotonic):", "        self._clock = clock"],
            8,
        ),
    )
    bash(
        "cd /workspace/pool && sed -i 's/time\\.monotonic()/self._clock()/' src/pool/cache.py && "
        "grep -n '_clock' src/pool/cache.py",
        "8:    def __init__(self, ttl, clock=time.monotonic):\n9:        self._clock = clock\n"
        "13:        self._expires[key] = self._clock() + self._ttl\n16:        if self._clock() > "
        "self._expires.get(key, 0):",
    )
    s.call(
        ed,
        {
            "command": "str_replace",
            "path": "/workspace/pool/tests/test_cache.py",
            "old_str": "    cache = TTLCache(ttl=0.01)\n    cache.set('k', 'v')\n    "
            "time.sleep(0.01)",
            "new_str": "    now = [100.0]\n    cache = TTLCache(ttl=5, clock=lambda: now[0])\n    "
            "cache.set('k', 'v')\n"
            "    now[0] += 5.001",
        },
        _edited_snippet(
            "/workspace/pool/tests/test_cache.py",
            ["    now = [100.0]", "    cache = TTLCache(ttl=5, clock=lambda: now[0])"],
            7,
        ),
    )
    bash(f"{ttl} --count=200 2>&1 | tail -1", "200 passed in 0.41s")
    bash(
        "cd /workspace/pool && python -m pytest -q -p no:randomly 2>&1 | tail -1",
        "142 passed in 11.87s",
    )
    bash("cd /workspace/pool && python -m pytest -q -n 4 2>&1 | tail -1", "142 passed in 4.02s")
    bash(
        "cd /workspace/pool && git diff --stat",
        " src/pool/cache.py   |  8 +++++---\n src/pool.py         |  7 +++++--\n "
        "tests/test_cache.py |  5 +++--\n"
        " 3 files changed, 13 insertions(+), 7 deletions(-)",
    )
    s.call(
        "finish",
        {
            "message": "Fixed both flaky tests: the pool's shutdown now waits for running tasks "
            "(task_done after the task), and the TTL cache takes a clock the test drives."
        },
        "Task finished.",
    )
    return s.session()


# -- 7. a fix reverted once to see the test fail without it, then re-applied ----------------------


def revert_to_confirm() -> Session:
    s = Script(
        "revert-to-confirm",
        "mini-swe-agent",
        "gpt-5",
        "a fix checked by stashing it (the new test fails) and popping it back (the test passes)",
    )
    s.sh(
        "cat README.md | head -20",
        "# formkit\n\nDeclarative form validation.\n\n```python\n"
        "Form(age=IntegerField(required=False)).clean({'age': 0})\n```",
    )
    s.sh(
        "cat <<'EOF' > reproduce.py\nfrom formkit import Form, IntegerField\n\n"
        "form = Form(age=IntegerField(required=False))\nprint(form.clean({'age': 0}))\n"
        "print(form.clean({'age': None}))\nEOF\npython reproduce.py",
        "{'age': None}\n{'age': None}",
    )
    s.sh(
        "grep -rn 'def clean' formkit/ | head",
        "formkit/fields.py:88:    def clean(self, value):\n"
        "formkit/fields.py:204:    def clean(self, value):\nformkit/form.py:41:    def "
        "clean(self, data):",
    )
    s.sh(
        "sed -n '80,110p' formkit/fields.py",
        "class Field:\n    def __init__(self, required=True):\n"
        "        self.required = required\n\n    def clean(self, value):\n        if not value:\n"
        "            if self.required:\n                raise ValidationError('required')\n       "
        "     return None\n"
        "        return self.to_python(value)",
    )
    s.sh(
        "sed -n '196,230p' formkit/fields.py",
        "class IntegerField(Field):\n    def to_python(self, value):\n"
        "        try:\n            return int(value)\n        except (TypeError, ValueError):\n"
        "            raise ValidationError('not an integer')",
    )
    s.sh(
        "git log -S'if not value:' --oneline -- formkit/fields.py",
        "3c2a1f9 fields: treat empty strings as missing",
    )
    s.sh(
        "git show 3c2a1f9 --stat",
        "commit 3c2a1f9\n    fields: treat empty strings as missing\n\n formkit/fields.py | 2 +-\n"
        " 1 file changed",
    )
    s.sh(
        "sed -i '93s/if not value:/if value is None or value == \"\":/' formkit/fields.py && sed "
        "-n '90,96p' formkit/fields.py",
        '    def clean(self, value):\n        if value is None or value == "":\n            if '
        "self.required:",
    )
    s.sh("python reproduce.py", "{'age': 0}\n{'age': None}")
    s.sh("python -m pytest tests/test_fields.py -q", pytest_q(31, 1, base=0.27))
    s.sh(
        "grep -n 'def test_' tests/test_fields.py | tail -5",
        "71:def test_integer_rejects_text():\n"
        "77:def test_integer_optional_missing():\n83:def test_empty_string_is_missing():\n"
        "89:def test_required_missing():\n95:def test_boolean_false():",
    )
    s.sh(
        "cat >> tests/test_fields.py <<'EOF'\n\n\ndef test_zero_is_kept():\n"
        "    form = Form(age=IntegerField(required=False))\n    assert form.clean({'age': 0}) == "
        "{'age': 0}\n\n\n"
        "def test_false_is_kept():\n    form = Form(ok=BooleanField(required=False))\n"
        "    assert form.clean({'ok': False}) == {'ok': False}\nEOF"
    )
    s.sh("python -m pytest tests/test_fields.py -q", pytest_q(33, 2, base=0.27))
    # The check: without the fix the new tests fail; with it they pass.
    s.sh(
        "git stash push formkit/fields.py",
        "Saved working directory and index state WIP on main: 8d1e2f3 release 1.4.2",
    )
    s.sh(
        "python -m pytest tests/test_fields.py -q 2>&1 | tail -4",
        "FAILED tests/test_fields.py::test_zero_is_kept - AssertionError: assert {'age': None} == "
        "{'age': 0}\n"
        "FAILED tests/test_fields.py::test_false_is_kept - AssertionError: assert {'ok': None} == "
        "{'ok': False}\n"
        "2 failed, 31 passed in 0.29s",
    )
    s.sh(
        "git stash pop",
        "On branch main\nChanges not staged for commit:\n\tmodified:   formkit/fields.py\n"
        "\tmodified:   tests/test_fields.py\nDropped refs/stash@{0} (5b9c0e1d)",
    )
    s.sh("python -m pytest tests/test_fields.py -q", pytest_q(33, 3, base=0.27))
    s.sh(
        "python -m pytest -q 2>&1 | tail -2",
        "FAILED tests/test_form.py::test_blank_form_errors - AssertionError: assert {} == "
        "{'name': ['required']}\n"
        "1 failed, 187 passed in 1.62s",
    )
    s.sh(
        "sed -n '1,40p' tests/test_form.py",
        "def test_blank_form_errors():\n    form = Form(name=CharField())\n"
        "    errors = form.errors({'name': '   '})\n    assert errors == {'name': ['required']}",
    )
    s.sh(
        "sed -n '150,175p' formkit/fields.py",
        "class CharField(Field):\n    def __init__(self, strip=True, **kw):\n"
        "        super().__init__(**kw)\n        self.strip = strip\n\n    def to_python(self, "
        "value):\n"
        "        return value.strip() if self.strip else value",
    )
    s.sh("grep -n 'strip' formkit/form.py", "52:            value = field.clean(raw)")
    s.sh(
        'sed -i \'93s/if value is None or value == "":/if value is None or (isinstance(value, '
        "str) and not value.strip()):/' formkit/fields.py && sed -n '92,95p' formkit/fields.py",
        "    def clean(self, value):\n        if value is None or (isinstance(value, str) and not "
        "value.strip()):",
    )
    s.sh("python -m pytest -q 2>&1 | tail -2", "188 passed in 1.58s")
    s.sh("python reproduce.py", "{'age': 0}\n{'age': None}")
    s.sh(
        "cat >> tests/test_fields.py <<'EOF'\n\n\ndef test_blank_string_is_missing():\n"
        "    form = Form(name=CharField(required=False))\n    assert form.clean({'name': '  '}) "
        "== {'name': None}\nEOF"
    )
    s.sh("python -m pytest tests/test_fields.py -q", pytest_q(34, 4, base=0.27))
    s.sh(
        "python -m pytest -q --cov=formkit 2>&1 | grep -E 'fields.py|TOTAL'",
        "formkit/fields.py     212      3    99%\nTOTAL                 641     12    98%",
    )
    s.sh("flake8 formkit tests", "")
    s.sh(
        "sed -n '1,15p' CHANGELOG.rst",
        "Changelog\n=========\n\n1.4.2\n-----\n\n- Empty strings count as missing.",
    )
    s.sh(
        "sed -i '4i 1.4.3 (unreleased)\\n------------------\\n\\n- Falsy values (0, False) are no "
        "longer dropped as missing.\\n' CHANGELOG.rst"
    )
    s.sh(
        "rm reproduce.py && git status --short",
        " M CHANGELOG.rst\n M formkit/fields.py\n M tests/test_fields.py",
    )
    s.sh(
        "git diff formkit/fields.py",
        "@@ -90,7 +90,7 @@ class Field:\n     def clean(self, value):\n-        if not value:\n"
        "+        if value is None or (isinstance(value, str) and not value.strip()):",
    )
    s.sh("python -m pytest -q -W error 2>&1 | tail -1", "189 passed in 1.66s")
    s.sh("python -m mypy formkit", "Success: no issues found in 6 source files")
    s.sh(
        "python -m pytest tests/test_form.py tests/test_fields.py -q -k 'missing or kept'",
        "........                                                                 [100%]\n8 "
        "passed, 181 deselected in 0.31s",
    )
    s.sh(
        "git diff --stat",
        " CHANGELOG.rst        |  5 +++++\n formkit/fields.py    |  2 +-\n tests/test_fields.py | "
        "17 +++++++++++++++++\n 3 files changed, 23 insertions(+), 1 deletion(-)",
    )
    s.sh('python -c "import formkit; print(formkit.__version__)"', "1.4.2")
    s.sh("grep -rn 'if not value' formkit/", "formkit/widgets.py:31:        if not value:")
    s.sh(
        "sed -n '25,40p' formkit/widgets.py",
        "class Checkbox(Widget):\n    def render(self, value):\n"
        "        if not value:\n            return '<input type=\"checkbox\">'\n        return "
        "'<input type=\"checkbox\" checked>'",
    )
    s.sh(
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached --stat",
        "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n 3 files changed, 23 insertions(+), 1 deletion(-)",
    )
    return s.session()


# -- 8. pagination: list_items(page=N) for N = 1..30 --------------------------------------------


def paginated_inventory_audit() -> Session:
    s = Script(
        "paginated-inventory-audit",
        "openai-agents",
        "gpt-4.1-mini",
        "an inventory audit that reads list_items(page=1..30) and follows up the anomalies",
    )
    s.user(
        "Audit the warehouse inventory: list every SKU with negative or zero stock, and any "
        "item whose reorder point is above its stock."
    )
    s.call(
        "get_inventory_summary",
        {"warehouse": "BER-2"},
        {"warehouse": "BER-2", "skus": 2937, "page_size": 100, "pages": 30, "as_of": "2025-03-14"},
    )
    flagged: list[str] = []
    for page in range(1, 31):
        items = []
        for k in range(4):
            n = (page - 1) * 100 + k * 23 + page % 7
            stock = (n * 7919) % 173 - 9
            items.append(
                {
                    "sku": f"BER2-{n:05d}",
                    "name": f"item {n}",
                    "stock": stock,
                    "reorder_at": (n * 31) % 40,
                }
            )
            if stock <= 0 or (n * 31) % 40 > stock:
                flagged.append(f"BER2-{n:05d}")
        s.call(
            "list_items",
            {"warehouse": "BER-2", "page": page, "page_size": 100},
            {
                "page": page,
                "items": items,
                "shown": 4,
                "returned": 100 if page < 30 else 37,
                "has_more": page < 30,
            },
        )
        if page in (10, 20):
            s.call(
                "think",
                {
                    "thought": f"After {page} pages, {len(flagged)} SKUs are flagged; "
                    "several negative counts cluster in aisle 14. Check a few of them in detail "
                    "after the listing."
                },
                "ok",
            )
    for sku in flagged[:6]:
        s.call(
            "get_item",
            {"sku": sku},
            {
                "sku": sku,
                "aisle": 14,
                "bin": f"14-{sku[-2:]}",
                "last_count": "2025-02-28",
                "pending_receipts": int(sku[-1]) % 3,
            },
        )
    s.call(
        "write_report",
        {
            "path": "reports/BER-2-audit.md",
            "content": "# BER-2 inventory audit\n\n" + "\n".join(f"- {sku}" for sku in flagged),
        },
        {"written": True, "path": "reports/BER-2-audit.md", "bytes": 30 + 13 * len(flagged)},
    )
    s.reply(
        f"Audit done: {len(flagged)} of 2,937 SKUs need attention (negative/zero stock or under "
        "their reorder point). Four from aisle 14 have pending receipts. Report: "
        "reports/BER-2-audit.md."
    )
    return s.session()


# -- 9. a cursor loop: a channel's history read page by page, then its threads ---------------------


def cursor_channel_digest() -> Session:
    s = Script(
        "cursor-channel-digest",
        "slack-digest-bot",
        "gpt-4o",
        "a channel's history read by next_cursor until it runs out, threads fetched, a digest "
        "posted",
    )
    channel = "C04INCIDENTS"
    cursor: str | None = None
    threads: list[str] = []
    for page in range(1, 27):
        args: dict[str, object] = {"channel": channel, "limit": 200, "oldest": "1740787200"}
        if cursor is not None:
            args["cursor"] = cursor
        nxt = None if page == 26 else f"dXNlcjpVMDYx{page * 7919:08X}Qk0{page:02d}"
        ts = [f"17410{page:02d}{k:03d}.{100 + page * k:06d}" for k in (11, 47, 230)]
        msgs = [
            {
                "ts": t,
                "user": f"U0{(page * 3 + i) % 17:02d}",
                "text": f"#{page}-{i} deploy note",
                "reply_count": (page + i) % 4,
            }
            for i, t in enumerate(ts)
        ]
        if page % 3 == 1:
            threads.append(ts[0])
        s.call(
            "conversations_history",
            args,
            {
                "ok": True,
                "messages": msgs,
                "has_more": nxt is not None,
                "response_metadata": {"next_cursor": nxt or ""},
            },
        )
        cursor = nxt
    for n, thread in enumerate(threads):
        s.call(
            "conversations_replies",
            {"channel": channel, "ts": thread},
            {
                "ok": True,
                "messages": [
                    {"ts": thread, "text": f"thread {n}"},
                    {"ts": f"{thread[:-3]}{900 + n}", "text": f"resolved by rollback {n}"},
                ],
            },
        )
    s.call(
        "users_info",
        {"user": "U007"},
        {"ok": True, "user": {"id": "U007", "real_name": "Dana Ortiz"}},
    )
    s.call(
        "users_info",
        {"user": "U012"},
        {"ok": True, "user": {"id": "U012", "real_name": "Sam Okafor"}},
    )
    s.call(
        "chat_postMessage",
        {
            "channel": "C01DIGEST",
            "text": f"*Incidents this week*: {len(threads)} threads, "
            "3 rollbacks, 1 open (payments-eu). Owners: Dana Ortiz, Sam Okafor.",
        },
        {"ok": True, "channel": "C01DIGEST", "ts": "1741699200.000200"},
    )
    s.call(
        "reactions_add",
        {"channel": "C01DIGEST", "timestamp": "1741699200.000200", "name": "white_check_mark"},
        {"ok": True},
    )
    s.reply("Posted the weekly incident digest to #digest.")
    return s.session()


# -- 10. polls that end: get_job_status "running" 8 to 12 times, with and without a sleep between -


def poll_export_with_sleep() -> Session:
    s = Script(
        "poll-export-with-sleep",
        "data-export-agent",
        "gemini-2.5-flash",
        "two exports polled to the end with get_job_status, a sleep call between each poll",
    )
    s.user(
        "Export last quarter's orders and refunds to the finance bucket and tell me the row counts."
    )
    s.call(
        "list_datasets",
        {"project": "shop-prod"},
        {"datasets": ["orders", "refunds", "customers", "events"]},
    )
    s.call(
        "start_export",
        {
            "dataset": "orders",
            "where": "created_at >= '2024-10-01' AND created_at < '2025-01-01'",
            "format": "parquet",
            "destination": "gs://finance-exports/2024Q4/orders/",
        },
        {"job_id": "exp_7f3a91", "status": "queued"},
    )
    for _ in range(12):
        s.call("sleep", {"seconds": 30}, "Slept 30 seconds.")
        s.call(
            "get_job_status",
            {"job_id": "exp_7f3a91"},
            {"job_id": "exp_7f3a91", "status": "running"},
        )
    s.call("sleep", {"seconds": 30}, "Slept 30 seconds.")
    s.call(
        "get_job_status",
        {"job_id": "exp_7f3a91"},
        {"job_id": "exp_7f3a91", "status": "done", "rows": 482113, "files": 12},
    )
    s.call(
        "count_rows",
        {
            "dataset": "orders",
            "where": "created_at >= '2024-10-01' AND created_at < '2025-01-01'",
        },
        {"rows": 482113},
    )
    s.call(
        "preview_parquet",
        {"path": "gs://finance-exports/2024Q4/orders/part-00000.parquet", "rows": 3},
        "order_id | created_at          | total  | currency\n"
        "O-918233 | 2024-10-01 00:00:04 | 81.20  | EUR\n"
        "O-918234 | 2024-10-01 00:00:09 | 14.99  | EUR\n"
        "O-918235 | 2024-10-01 00:00:31 | 230.00 | GBP",
    )
    s.call(
        "start_export",
        {
            "dataset": "refunds",
            "where": "created_at >= '2024-10-01' AND created_at < '2025-01-01'",
            "format": "parquet",
            "destination": "gs://finance-exports/2024Q4/refunds/",
        },
        {"job_id": "exp_80c2d4", "status": "queued"},
    )
    for wait in (10, 20, 30, 30, 45, 45, 60, 60):
        s.call("sleep", {"seconds": wait}, f"Slept {wait} seconds.")
        s.call(
            "get_job_status",
            {"job_id": "exp_80c2d4"},
            {"job_id": "exp_80c2d4", "status": "running"},
        )
    s.call("sleep", {"seconds": 60}, "Slept 60 seconds.")
    s.call(
        "get_job_status",
        {"job_id": "exp_80c2d4"},
        {"job_id": "exp_80c2d4", "status": "done", "rows": 20371, "files": 1},
    )
    s.call(
        "count_rows",
        {
            "dataset": "refunds",
            "where": "created_at >= '2024-10-01' AND created_at < '2025-01-01'",
        },
        {"rows": 20371},
    )
    s.call(
        "write_object",
        {
            "bucket": "finance-exports",
            "path": "2024Q4/MANIFEST.json",
            "content": '{"orders": {"rows": 482113, "files": 12}, "refunds": {"rows": 20371, '
            '"files": 1}}',
        },
        {"written": True, "generation": "1741946022118261"},
    )
    s.call(
        "create_signed_url",
        {"bucket": "finance-exports", "path": "2024Q4/MANIFEST.json", "expires_hours": 72},
        {
            "url": "https://storage.googleapis.com/finance-exports/2024Q4/MANIFEST.json?X-Goog-Si"
            "gnature=9c1f"
        },
    )
    s.call(
        "list_objects",
        {"bucket": "finance-exports", "prefix": "2024Q4/"},
        {
            "objects": [f"2024Q4/orders/part-{i:05d}.parquet" for i in range(12)]
            + ["2024Q4/refunds/part-00000.parquet"]
        },
    )
    s.reply(
        "Both exports are in gs://finance-exports/2024Q4/: orders 482,113 rows (12 files), "
        "refunds 20,371 rows (1 file), both matching the source counts. A manifest is at "
        "2024Q4/MANIFEST.json (signed link valid 72 h)."
    )
    return s.session()


def poll_ci_without_sleep() -> Session:
    s = Script(
        "poll-ci-without-sleep",
        "release-agent",
        "gpt-4.1",
        "a CI run and a deploy polled back to back (no sleep) until they finish, then verified",
    )
    s.user("Ship v3.8.1: run CI on the tag, deploy to staging if green, and smoke-test it.")
    s.call(
        "git_tag",
        {"repo": "acme/api", "tag": "v3.8.1", "ref": "main"},
        {"tag": "v3.8.1", "sha": "9f2c1e7"},
    )
    s.call(
        "trigger_pipeline",
        {"repo": "acme/api", "ref": "v3.8.1", "workflow": "ci.yml"},
        {"job_id": "ci-55213", "status": "queued", "url": "https://ci.acme.dev/runs/55213"},
    )
    s.call("get_job_status", {"job_id": "ci-55213"}, {"job_id": "ci-55213", "status": "queued"})
    for _ in range(11):
        s.call(
            "get_job_status", {"job_id": "ci-55213"}, {"job_id": "ci-55213", "status": "running"}
        )
    s.call(
        "get_job_status",
        {"job_id": "ci-55213"},
        {
            "job_id": "ci-55213",
            "status": "done",
            "conclusion": "success",
            "tests": {"passed": 1841, "skipped": 12},
        },
    )
    s.call(
        "get_job_logs",
        {"job_id": "ci-55213", "step": "integration"},
        "collected 312 items\n...\n312 passed, 4 skipped in 212.44s",
    )
    s.call(
        "deploy",
        {"service": "api", "environment": "staging", "version": "v3.8.1"},
        {"job_id": "dep-9031", "status": "queued"},
    )
    for _ in range(9):
        s.call(
            "get_job_status", {"job_id": "dep-9031"}, {"job_id": "dep-9031", "status": "running"}
        )
    s.call(
        "get_job_status",
        {"job_id": "dep-9031"},
        {"job_id": "dep-9031", "status": "done", "replicas": "3/3"},
    )
    for path, body in (
        ("/healthz", "ok"),
        ("/v3/version", "v3.8.1"),
        ("/v3/orders?limit=1", "200, 1 order"),
        ("/v3/customers/me", "401 without a token"),
        ("/v3/metrics", "200, 1822 series"),
    ):
        s.call("http_get", {"url": f"https://staging.api.acme.dev{path}"}, body)
    s.call(
        "get_error_rate",
        {"service": "api", "environment": "staging", "window_minutes": 10},
        {"error_rate": 0.0007, "requests": 14502},
    )
    s.call(
        "post_release_note",
        {
            "channel": "#releases",
            "text": "api v3.8.1 on staging: CI green (1,841 tests), "
            "smoke tests pass, error rate 0.07 %.",
        },
        {"ok": True},
    )
    s.reply(
        "v3.8.1 is on staging: CI passed (1,841 tests), deploy finished with 3/3 replicas, smoke "
        "tests pass and the error rate is 0.07 %. Say the word and I'll promote it to production."
    )
    s.user("Go ahead with production.")
    s.call(
        "deploy",
        {"service": "api", "environment": "production", "version": "v3.8.1"},
        {"job_id": "dep-9032", "status": "queued"},
    )
    for status in (
        "running",
        "running",
        "running",
        "running",
        "running",
        "running",
        "running",
        "running",
    ):
        s.call("get_job_status", {"job_id": "dep-9032"}, {"job_id": "dep-9032", "status": status})
    s.call(
        "get_job_status",
        {"job_id": "dep-9032"},
        {"job_id": "dep-9032", "status": "done", "replicas": "12/12"},
    )
    s.call("http_get", {"url": "https://api.acme.dev/v3/version"}, "v3.8.1")
    s.reply("Production is on v3.8.1 (12/12 replicas).")
    return s.session()


# -- 11. conversational agents: a customer served over many turns ----------------------------------


def airline_rebooking_conversation() -> Session:
    s = Script(
        "airline-rebooking-conversation",
        "tau-airline",
        "gpt-4o",
        "an airline agent books a round trip, adds bags, answers policy questions over 20 turns",
    )
    s.user("Hi, I want to book a round trip from New York to Seattle.")
    s.reply("I'd be happy to help you book a round trip. Could you please provide your user ID?")
    s.user("It's mia_li_3668.")
    s.call(
        "get_user_details",
        {"user_id": "mia_li_3668"},
        {
            "name": {"first_name": "Mia", "last_name": "Li"},
            "membership": "gold",
            "payment_methods": {
                "credit_card_4421383": {
                    "source": "credit_card",
                    "brand": "visa",
                    "last_four": "7447",
                },
                "certificate_7504069": {"source": "certificate", "amount": 250},
            },
            "saved_passengers": [
                {"first_name": "Amelia", "last_name": "Ahmed", "dob": "1957-03-21"}
            ],
            "reservations": ["NO6JO3", "AIXC49", "HKEG34"],
        },
    )
    s.reply(
        "Thank you, Mia. Which dates would you like to travel, from which New York airport "
        "(JFK, LGA or EWR), and in which cabin class?"
    )
    s.user("JFK, leaving May 20 and coming back May 25. Economy. Just me.")
    s.call(
        "search_direct_flight",
        {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"},
        [
            {
                "flight_number": "HAT083",
                "scheduled_departure_time_est": "07:00:00",
                "prices": {"basic_economy": 91, "economy": 152, "business": 412},
                "available_seats": {"economy": 9},
            },
            {
                "flight_number": "HAT100",
                "scheduled_departure_time_est": "16:00:00",
                "prices": {"basic_economy": 62, "economy": 188, "business": 377},
                "available_seats": {"economy": 2},
            },
        ],
    )
    s.call(
        "search_direct_flight",
        {"origin": "SEA", "destination": "JFK", "date": "2024-05-25"},
        [
            {
                "flight_number": "HAT021",
                "scheduled_departure_time_est": "11:00:00",
                "prices": {"basic_economy": 77, "economy": 171, "business": 455},
                "available_seats": {"economy": 14},
            }
        ],
        batched=True,
    )
    s.reply(
        "Here are the direct options in economy:\n\nOutbound May 20 (JFK to SEA): HAT083 at "
        "07:00, $152; "
        "HAT100 at 16:00, $188.\nReturn May 25 (SEA to JFK): HAT021 at 11:00, $171.\n\nWhich "
        "outbound flight would you like?"
    )
    s.user("The morning one. Is there anything cheaper for the return with a stop?")
    s.call(
        "search_onestop_flight",
        {"origin": "SEA", "destination": "JFK", "date": "2024-05-25"},
        [
            [
                {
                    "flight_number": "HAT011",
                    "origin": "SEA",
                    "destination": "ORD",
                    "prices": {"economy": 64},
                },
                {
                    "flight_number": "HAT230",
                    "origin": "ORD",
                    "destination": "JFK",
                    "date": "2024-05-25",
                    "prices": {"economy": 71},
                },
            ],
            [
                {
                    "flight_number": "HAT045",
                    "origin": "SEA",
                    "destination": "DEN",
                    "prices": {"economy": 88},
                },
                {
                    "flight_number": "HAT152",
                    "origin": "DEN",
                    "destination": "JFK",
                    "date": "2024-05-26",
                    "prices": {"economy": 97},
                },
            ],
        ],
    )
    s.call("calculate", {"expression": "64 + 71"}, "135.0")
    s.reply(
        "Yes: HAT011 SEA to ORD, then HAT230 ORD to JFK, both on May 25, is $135 in economy, "
        "$36 less than the direct flight. The other one-stop option lands May 26 and costs more."
    )
    s.user("Let's do the one-stop then. How many free bags do I get?")
    s.call(
        "think",
        {
            "thought": "Gold member, economy: 3 free checked bags per passenger. One passenger. "
            "Total 152 + 64 + 71 = 287. Ask about insurance and payment before booking."
        },
        "",
    )
    s.reply(
        "As a gold member in economy you get 3 free checked bags. Would you like travel insurance "
        "($30), and how would you like to pay: the Visa ending 7447 or your $250 certificate?"
    )
    s.user("No insurance. Use the certificate and put the rest on the card. One bag.")
    s.call("calculate", {"expression": "152 + 64 + 71 - 250"}, "37.0")
    s.reply(
        "To confirm: JFK to SEA HAT083 May 20; SEA to ORD HAT011 and ORD to JFK HAT230 May 25; "
        "economy; "
        "passenger Mia Li; 1 checked bag (free); no insurance. Total $287: $250 from the "
        "certificate and "
        "$37 on the Visa ending 7447. Shall I book it?"
    )
    s.user("Yes please.")
    s.call(
        "book_reservation",
        {
            "user_id": "mia_li_3668",
            "origin": "JFK",
            "destination": "SEA",
            "flight_type": "round_trip",
            "cabin": "economy",
            "flights": [
                {"flight_number": "HAT083", "date": "2024-05-20"},
                {"flight_number": "HAT011", "date": "2024-05-25"},
                {"flight_number": "HAT230", "date": "2024-05-25"},
            ],
            "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
            "payment_methods": [
                {"payment_id": "certificate_7504069", "amount": 250},
                {"payment_id": "credit_card_4421383", "amount": 37},
            ],
            "total_baggages": 1,
            "nonfree_baggages": 0,
            "insurance": "no",
        },
        {"reservation_id": "TZ6R2Q", "status": "confirmed", "total": 287},
    )
    s.call(
        "get_reservation_details",
        {"reservation_id": "TZ6R2Q"},
        {
            "reservation_id": "TZ6R2Q",
            "cabin": "economy",
            "total_baggages": 1,
            "status": "confirmed",
            "flights": [
                {"flight_number": "HAT083", "date": "2024-05-20"},
                {"flight_number": "HAT011", "date": "2024-05-25"},
                {"flight_number": "HAT230", "date": "2024-05-25"},
            ],
        },
    )
    s.reply("Booked! Your reservation ID is TZ6R2Q. Is there anything else I can help with?")
    s.user("Which seat do I have?")
    s.reply(
        "Seats aren't assigned at booking for economy; you can pick one at online check-in, 24 "
        "hours before departure."
    )
    s.user("Yes, on my other trip, NO6JO3, can I add two bags?")
    s.call(
        "get_reservation_details",
        {"reservation_id": "NO6JO3"},
        {
            "reservation_id": "NO6JO3",
            "cabin": "basic_economy",
            "total_baggages": 0,
            "nonfree_baggages": 0,
            "passengers": [
                {"first_name": "Mia", "last_name": "Li"},
                {"first_name": "Amelia", "last_name": "Ahmed"},
            ],
            "flights": [
                {
                    "flight_number": "HAT213",
                    "date": "2024-06-02",
                    "origin": "ORD",
                    "destination": "LAX",
                }
            ],
        },
    )
    s.call(
        "think",
        {
            "thought": "Basic economy, gold member: 1 free bag per passenger, 2 passengers, so 2 "
            "free. "
            "Two bags in all: both free. Confirm with the user first."
        },
        "",
    )
    s.reply(
        "NO6JO3 is a basic economy reservation for you and Amelia Ahmed. As a gold member you get "
        "one "
        "free checked bag per passenger, so two bags would be free. Shall I add them?"
    )
    s.user("Great, yes.")
    s.call(
        "update_reservation_baggages",
        {
            "reservation_id": "NO6JO3",
            "total_baggages": 2,
            "nonfree_baggages": 0,
            "payment_id": "credit_card_4421383",
        },
        {"reservation_id": "NO6JO3", "total_baggages": 2, "nonfree_baggages": 0},
    )
    s.reply("Done: NO6JO3 now has 2 checked bags at no charge.")
    s.user("If I had to cancel TZ6R2Q, would I get my money back?")
    s.reply(
        "TZ6R2Q has no travel insurance and is economy. It can be cancelled for a refund within "
        "24 hours "
        "of booking; after that, only if the airline cancels the flight, or for a covered reason "
        "with insurance."
    )
    s.user("And the certificate part?")
    s.reply(
        "A refund goes back to the original payment methods: the $250 would be restored as a "
        "certificate "
        "and the $37 refunded to your Visa."
    )
    s.user("What about changing the date instead?")
    s.reply(
        "Economy reservations can be changed without a fee as long as the origin, destination and "
        "trip type "
        "stay the same; you'd pay any fare difference. Would you like me to look at other dates?"
    )
    s.user("Maybe. What do flights on May 22 look like for the way out?")
    s.call(
        "search_direct_flight",
        {"origin": "JFK", "destination": "SEA", "date": "2024-05-22"},
        [
            {
                "flight_number": "HAT083",
                "scheduled_departure_time_est": "07:00:00",
                "prices": {"economy": 139},
                "available_seats": {"economy": 11},
            },
            {
                "flight_number": "HAT100",
                "scheduled_departure_time_est": "16:00:00",
                "prices": {"economy": 144},
                "available_seats": {"economy": 6},
            },
        ],
    )
    s.reply(
        "On May 22 HAT083 (07:00) is $139 and HAT100 (16:00) is $144, both less than your current "
        "$152."
    )
    s.user("OK, move me to HAT083 on the 22nd.")
    s.call(
        "update_reservation_flights",
        {
            "reservation_id": "TZ6R2Q",
            "cabin": "economy",
            "flights": [
                {"flight_number": "HAT083", "date": "2024-05-22"},
                {"flight_number": "HAT011", "date": "2024-05-25"},
                {"flight_number": "HAT230", "date": "2024-05-25"},
            ],
            "payment_id": "credit_card_4421383",
        },
        {
            "reservation_id": "TZ6R2Q",
            "status": "confirmed",
            "refund": 13,
            "flights": ["HAT083 2024-05-22", "HAT011 2024-05-25", "HAT230 2024-05-25"],
        },
    )
    s.call(
        "get_reservation_details",
        {"reservation_id": "TZ6R2Q"},
        {
            "reservation_id": "TZ6R2Q",
            "cabin": "economy",
            "total_baggages": 1,
            "flights": [
                {"flight_number": "HAT083", "date": "2024-05-22"},
                {"flight_number": "HAT011", "date": "2024-05-25"},
                {"flight_number": "HAT230", "date": "2024-05-25"},
            ],
        },
    )
    s.reply(
        "You're now on HAT083 on May 22; the $13 fare difference goes back to your Visa. Your "
        "return is unchanged."
    )
    s.user(
        "Actually, one more. My flight last week, HAT213's earlier leg on reservation AIXC49, was "
        "delayed "
        "four hours. Can I get something for that?"
    )
    s.call(
        "get_reservation_details",
        {"reservation_id": "AIXC49"},
        {
            "reservation_id": "AIXC49",
            "cabin": "business",
            "insurance": "yes",
            "passengers": [{"first_name": "Mia", "last_name": "Li"}],
            "flights": [
                {
                    "flight_number": "HAT176",
                    "date": "2024-05-08",
                    "origin": "BOS",
                    "destination": "JFK",
                }
            ],
        },
    )
    s.call("get_flight_status", {"flight_number": "HAT176", "date": "2024-05-08"}, "delayed")
    s.call(
        "think",
        {
            "thought": "Gold member, business cabin, the flight was delayed: eligible for a $50 "
            "certificate per passenger as a gesture, once the user confirms they want it. One "
            "passenger."
        },
        "",
    )
    s.reply(
        "I'm sorry about the delay. HAT176 on May 8 was indeed delayed, and as a gold member in "
        "business "
        "you're eligible for a $50 travel certificate. Would you like me to issue it?"
    )
    s.user("Yes please.")
    s.call(
        "send_certificate",
        {"user_id": "mia_li_3668", "amount": 50},
        "Certificate certificate_3310742 added to user mia_li_3668 with amount 50.",
    )
    s.call(
        "get_user_details",
        {"user_id": "mia_li_3668"},
        {
            "name": {"first_name": "Mia", "last_name": "Li"},
            "membership": "gold",
            "payment_methods": {
                "credit_card_4421383": {
                    "source": "credit_card",
                    "brand": "visa",
                    "last_four": "7447",
                },
                "certificate_3310742": {"source": "certificate", "amount": 50},
            },
            "reservations": ["NO6JO3", "AIXC49", "HKEG34", "TZ6R2Q"],
        },
    )
    s.reply(
        "Done: a $50 certificate (certificate_3310742) is on your account for a future booking."
    )
    s.user("Can Amelia fly with me to Seattle too? Same flights.")
    s.call(
        "search_direct_flight",
        {"origin": "JFK", "destination": "SEA", "date": "2024-05-22"},
        [
            {
                "flight_number": "HAT083",
                "scheduled_departure_time_est": "07:00:00",
                "prices": {"economy": 139},
                "available_seats": {"economy": 10},
            },
            {
                "flight_number": "HAT100",
                "scheduled_departure_time_est": "16:00:00",
                "prices": {"economy": 144},
                "available_seats": {"economy": 6},
            },
        ],
    )
    s.reply(
        "Passengers can't be added to an existing reservation, but I can book Amelia on the same "
        "flights "
        "in a new one: $139 + $64 + $71 = $274 in economy. Would you like that, and how will you "
        "pay?"
    )
    s.user("Hmm, I'll ask her first. Thanks for everything.")
    s.reply(
        "Of course. When she's ready, I can book her on the same flights. Have a great trip to "
        "Seattle, Mia!"
    )
    return s.session()


def retail_support_with_policy_questions() -> Session:
    s = Script(
        "retail-support-policy-questions",
        "tau-retail",
        "claude-3-7-sonnet",
        "a retail agent exchanges an item, cancels an order and answers six policy questions in a "
        "row",
    )
    s.user("hey, I need to exchange a keyboard I got")
    s.reply(
        "Sure, I can help with that. To start, could you give me the email address on your account?"
    )
    s.user("yusuf.rossi@exmaple.com")
    s.call(
        "find_user_id_by_email",
        {"email": "yusuf.rossi@exmaple.com"},
        None,
        error="Error: user not found",
    )
    s.reply(
        "I couldn't find an account with yusuf.rossi@exmaple.com. Could it be a typo? Please "
        "double-check the address."
    )
    s.user("oops, yusuf.rossi@example.com")
    s.call("find_user_id_by_email", {"email": "yusuf.rossi@example.com"}, "yusuf_rossi_9620")
    s.call(
        "get_user_details",
        {"user_id": "yusuf_rossi_9620"},
        {
            "user_id": "yusuf_rossi_9620",
            "name": {"first_name": "Yusuf", "last_name": "Rossi"},
            "orders": ["#W6247578", "#W9711842", "#W4776164", "#W6679257"],
            "payment_methods": {
                "credit_card_9513926": {"brand": "mastercard", "last_four": "2478"}
            },
        },
    )
    s.reply(
        "Thanks, Yusuf. I see four orders on your account. Do you know which one had the keyboard?"
    )
    s.user("not sure, probably one of the recent ones")
    for order, status, items in (
        (
            "#W6247578",
            "delivered",
            [
                {
                    "name": "Mechanical Keyboard",
                    "item_id": "3616838507",
                    "options": {"switch type": "clicky", "backlight": "white", "size": "full size"},
                    "price": 226.11,
                }
            ],
        ),
        ("#W9711842", "pending", [{"name": "Desk Lamp", "item_id": "1270145486", "price": 144.07}]),
    ):
        s.call(
            "get_order_details",
            {"order_id": order},
            {
                "order_id": order,
                "status": status,
                "items": items,
                "payment_history": [{"amount": items[0]["price"]}],
            },
            batched=order != "#W6247578",
        )
    s.reply(
        "Found it: order #W6247578 (delivered) has a Mechanical Keyboard, clicky switches, white "
        "backlight, "
        "full size. What would you like to exchange it for?"
    )
    s.user("same keyboard but linear switches and RGB if you have it")
    s.call(
        "get_product_details",
        {"product_id": "1656367028"},
        {
            "name": "Mechanical Keyboard",
            "variants": {
                "1151293680": {
                    "options": {"switch type": "linear", "backlight": "RGB", "size": "full size"},
                    "available": True,
                    "price": 272.33,
                },
                "4843487907": {
                    "options": {"switch type": "linear", "backlight": "white", "size": "80%"},
                    "available": False,
                    "price": 254.84,
                },
                "3616838507": {
                    "options": {"switch type": "clicky", "backlight": "white", "size": "full size"},
                    "available": True,
                    "price": 226.11,
                },
            },
        },
    )
    s.call("calculate", {"expression": "272.33 - 226.11"}, "46.22")
    s.reply(
        "The full-size keyboard with linear switches and RGB backlight (item 1151293680) is in "
        "stock at "
        "$272.33, $46.22 more than yours. The difference would go on your Mastercard ending 2478. "
        "Shall I go ahead with the exchange?"
    )
    s.user("yes")
    s.call(
        "exchange_delivered_order_items",
        {
            "order_id": "#W6247578",
            "item_ids": ["3616838507"],
            "new_item_ids": ["1151293680"],
            "payment_method_id": "credit_card_9513926",
        },
        {
            "order_id": "#W6247578",
            "status": "exchange requested",
            "exchange_price_difference": 46.22,
        },
    )
    s.reply(
        "Done: the exchange is requested. You'll get an email with the return label; the $46.22 "
        "difference will be charged once the new keyboard ships."
    )
    s.user("ok. also cancel the lamp order, I found one cheaper")
    s.reply(
        "Order #W9711842 (Desk Lamp, $144.07) is still pending, so it can be cancelled. The "
        "reason would be "
        "'no longer needed'. Confirm and I'll cancel it?"
    )
    s.user("confirm")
    s.call(
        "cancel_pending_order",
        {"order_id": "#W9711842", "reason": "no longer needed"},
        {"order_id": "#W9711842", "status": "cancelled", "refund": 144.07},
    )
    s.reply(
        "Cancelled. The $144.07 goes back to your original payment method in 5 to 7 business days."
    )
    # Policy questions, answered from the policy: no tool needed.
    for question, answer in (
        (
            "how long do I have to send the keyboard back?",
            "You have 30 days from delivery to ship the original keyboard back with the label.",
        ),
        ("do I pay for the return shipping?", "No, the return label for an exchange is free."),
        (
            "what if the new one is also wrong?",
            "Then you can request another exchange or a return for it, within 30 days of its "
            "delivery.",
        ),
        (
            "can I exchange it again for a different color later?",
            "An item can be exchanged once per order; after that a return would be needed.",
        ),
        (
            "and gift cards, can I use one for the difference?",
            "Yes, a gift card on your account can pay a price difference, if its balance covers "
            "it.",
        ),
        (
            "do you price match?",
            "We don't price match, but you can cancel a pending order at any time, as you did "
            "with the lamp.",
        ),
    ):
        s.user(question)
        s.reply(answer)
    s.user(
        "ok one last thing, change the address on my pending orders to 59 Elm St, Denver CO 80202"
    )
    s.call(
        "get_order_details",
        {"order_id": "#W4776164"},
        {
            "order_id": "#W4776164",
            "status": "pending",
            "address": {"address1": "763 Broadway", "city": "New York", "zip": "10003"},
        },
    )
    s.call(
        "get_order_details",
        {"order_id": "#W6679257"},
        {"order_id": "#W6679257", "status": "delivered"},
        batched=True,
    )
    s.reply(
        "Only #W4776164 is still pending (#W6679257 was delivered). Change its address to 59 Elm "
        "St, Denver, "
        "CO 80202?"
    )
    s.user("yes")
    s.call(
        "modify_pending_order_address",
        {
            "order_id": "#W4776164",
            "address1": "59 Elm St",
            "address2": "",
            "city": "Denver",
            "state": "CO",
            "country": "USA",
            "zip": "80202",
        },
        {
            "order_id": "#W4776164",
            "address": {"address1": "59 Elm St", "city": "Denver", "state": "CO", "zip": "80202"},
        },
    )
    s.call(
        "modify_user_address",
        {
            "user_id": "yusuf_rossi_9620",
            "address1": "59 Elm St",
            "address2": "",
            "city": "Denver",
            "state": "CO",
            "country": "USA",
            "zip": "80202",
        },
        {"user_id": "yusuf_rossi_9620", "address": {"address1": "59 Elm St", "city": "Denver"}},
    )
    s.reply("Updated the pending order and your default address. Anything else?")
    s.user("actually yes, what was in #W6679257? I think something there is broken")
    s.call(
        "get_order_details",
        {"order_id": "#W6679257"},
        {
            "order_id": "#W6679257",
            "status": "delivered",
            "items": [
                {"name": "Water Bottle", "item_id": "7199146548", "price": 48.02},
                {"name": "Bluetooth Speaker", "item_id": "2652637226", "price": 295.94},
            ],
            "payment_history": [{"payment_method_id": "credit_card_9513926", "amount": 343.96}],
        },
    )
    s.reply(
        "#W6679257 was delivered with a Water Bottle ($48.02) and a Bluetooth Speaker ($295.94). "
        "Which one is broken?"
    )
    s.user("the speaker, it won't charge. can I return it?")
    s.call(
        "think",
        {
            "thought": "Delivered order, speaker can be returned; refund to the original payment "
            "method (Mastercard 2478) or a gift card. Confirm the item and the refund method."
        },
        "",
    )
    s.reply(
        "Yes. I can return the Bluetooth Speaker for a $295.94 refund to your Mastercard ending "
        "2478. "
        "Shall I proceed?"
    )
    s.user("yes")
    s.call(
        "return_delivered_order_items",
        {
            "order_id": "#W6679257",
            "item_ids": ["2652637226"],
            "payment_method_id": "credit_card_9513926",
        },
        {"order_id": "#W6679257", "status": "return requested", "refund": 295.94},
    )
    s.call(
        "get_order_details",
        {"order_id": "#W6679257"},
        {"order_id": "#W6679257", "status": "return requested", "return_items": ["2652637226"]},
    )
    s.reply(
        "The return is requested; you'll get the label by email and the refund once it arrives."
    )
    s.user("do you have a replacement speaker that's waterproof?")
    s.call(
        "list_all_product_types",
        {},
        {
            "Bluetooth Speaker": "4768869376",
            "Headphones": "6992792935",
            "Water Bottle": "8310926033",
        },
    )
    s.call(
        "get_product_details",
        {"product_id": "4768869376"},
        {
            "name": "Bluetooth Speaker",
            "variants": {
                "7617930199": {
                    "options": {
                        "color": "red",
                        "battery life": "20 hours",
                        "water resistance": "yes",
                    },
                    "available": True,
                    "price": 285.94,
                },
                "2652637226": {
                    "options": {
                        "color": "green",
                        "battery life": "20 hours",
                        "water resistance": "no",
                    },
                    "available": True,
                    "price": 295.94,
                },
            },
        },
    )
    s.reply(
        "There's a red waterproof model (20 h battery) for $285.94. I can't add it to the "
        "returned order, "
        "but you can order it on the site as a new order."
    )
    s.user("ok cool, thanks for the help")
    s.reply("You're welcome, Yusuf. Have a good day!")
    return s.session()


# -- 12. an assistant that talks through send_message and thinks through think --------------------


def assistant_send_message_and_think() -> Session:
    s = Script(
        "assistant-send-message-think",
        "letta-assistant",
        "gpt-4.1",
        "a scheduling assistant that speaks only through send_message(text=...) and "
        "think(thought=...)",
    )

    def say(text: str) -> None:
        s.call(
            "send_message",
            {"text": text},
            {"status": "OK", "message": "None", "time": "2025-04-02 09:14:07 AM UTC+0000"},
        )

    def think(thought: str) -> None:
        s.call("think", {"thought": thought}, "None")

    s.user(
        "Can you set up the quarterly planning offsite with the leads? Two days, sometime in May."
    )
    think(
        "Need: who the leads are, their availability in May, a venue, and a budget check. Start "
        "with the team list."
    )
    s.call(
        "core_memory_search",
        {"query": "team leads"},
        "Leads: Priya (platform), Tomás (mobile), Ines (data), Kwame (design), Ruth (PM).",
    )
    say("On it. I'll check the five leads' calendars for two consecutive free days in May.")
    for lead, busy in (
        ("priya", "May 6-9, May 20"),
        ("tomas", "May 13-14, May 27-30"),
        ("ines", "May 1-2, May 21-23"),
        ("kwame", "May 15-16"),
        ("ruth", "May 8, May 22"),
    ):
        s.call(
            "calendar_busy",
            {"user": f"{lead}@acme.io", "start": "2025-05-01", "end": "2025-05-31"},
            {"user": f"{lead}@acme.io", "busy": busy},
        )
    think(
        "Busy days: 1-2, 6-9, 13-16, 20-23, 27-30. Free weekday pairs: none in the first three "
        "weeks except... "
        "May 12 (Mon) is free for all, May 13 Tomás is busy. May 19 (Mon) is free, May 20 Priya "
        "busy. "
        "May 26 is a holiday. Only pairs left cross a weekend. Ask whether a Thu-Fri in June "
        "would do, or a "
        "Mon-Tue with one lead remote."
    )
    say(
        "Bad news: there are no two consecutive weekdays in May when all five leads are free. "
        "Closest options: "
        "May 19-20 (Priya busy on the 20th) or May 12-13 (Tomás busy on the 13th). Or early June?"
    )
    s.user("Try the first week of June.")
    for lead, busy in (
        ("priya", "June 3"),
        ("tomas", ""),
        ("ines", "June 9"),
        ("kwame", "June 2"),
        ("ruth", ""),
    ):
        s.call(
            "calendar_busy",
            {"user": f"{lead}@acme.io", "start": "2025-06-02", "end": "2025-06-13"},
            {"user": f"{lead}@acme.io", "busy": busy},
        )
    think(
        "June 4-5 (Wed-Thu) and June 5-6 (Thu-Fri) are free for everyone. Offer both; Thu-Fri "
        "lets people travel Wednesday."
    )
    say(
        "Everyone is free June 4-5 and June 5-6. Which do you prefer? Thu-Fri lets people travel "
        "on Wednesday."
    )
    s.user("Thu-Fri. Find a venue near Lisbon for 6 people, under 4k total.")
    s.call(
        "search_venues",
        {
            "near": "Lisbon",
            "capacity": 6,
            "dates": ["2025-06-05", "2025-06-06"],
            "max_total_eur": 4000,
        },
        [
            {
                "id": "v-sintra-quinta",
                "name": "Quinta da Serra, Sintra",
                "total_eur": 3420,
                "rooms": 6,
                "meeting_room": True,
            },
            {
                "id": "v-cascais-hotel",
                "name": "Farol Hotel, Cascais",
                "total_eur": 3890,
                "rooms": 6,
                "meeting_room": True,
            },
            {
                "id": "v-lx-factory",
                "name": "LX Factory loft",
                "total_eur": 1900,
                "rooms": 0,
                "meeting_room": True,
            },
        ],
    )
    s.call(
        "get_venue",
        {"id": "v-sintra-quinta"},
        {
            "id": "v-sintra-quinta",
            "cancellation": "free until May 22",
            "rating": 4.7,
            "transfer_from_airport_min": 40,
        },
    )
    s.call(
        "get_venue",
        {"id": "v-cascais-hotel"},
        {
            "id": "v-cascais-hotel",
            "cancellation": "non-refundable",
            "rating": 4.5,
            "transfer_from_airport_min": 35,
        },
        batched=True,
    )
    think(
        "Sintra: cheaper, better rated, free cancellation. Cascais is non-refundable. LX Factory "
        "has no rooms. Recommend Sintra."
    )
    say(
        "I'd suggest Quinta da Serra in Sintra: €3,420 for 6 rooms and a meeting room, rated 4.7, "
        "free cancellation "
        "until May 22, 40 min from the airport. Farol Hotel in Cascais is €3,890 and "
        "non-refundable. Book Sintra?"
    )
    s.user("Yes, book it and send the invites.")
    s.call(
        "book_venue",
        {"id": "v-sintra-quinta", "check_in": "2025-06-04", "check_out": "2025-06-06", "guests": 6},
        {"booking_id": "BK-77120", "status": "confirmed", "total_eur": 3420},
    )
    s.call(
        "calendar_create_event",
        {
            "title": "Q3 planning offsite (Sintra)",
            "start": "2025-06-05T09:00",
            "end": "2025-06-06T17:00",
            "attendees": [
                "priya@acme.io",
                "tomas@acme.io",
                "ines@acme.io",
                "kwame@acme.io",
                "ruth@acme.io",
            ],
            "location": "Quinta da Serra, Sintra",
        },
        {"event_id": "evt_5521", "status": "created"},
    )
    s.call(
        "core_memory_append",
        {
            "label": "projects",
            "content": "Q3 offsite: Sintra, June 5-6 2025, booking BK-77120, evt_5521.",
        },
        "None",
    )
    say(
        "Booked (BK-77120, €3,420) and invites sent for June 5-6 at Quinta da Serra. Want me to "
        "arrange airport transfers "
        "and draft an agenda?"
    )
    s.user("Draft the agenda, transfers later.")
    s.call(
        "archival_memory_search",
        {"query": "last offsite agenda", "page": 0},
        [
            {
                "timestamp": "2025-01-14",
                "content": "Q1 offsite agenda: retro, roadmap, hiring, budget; dinner day 1.",
            }
        ],
    )
    think(
        "Reuse the Q1 structure: day 1 retro + roadmap, dinner; day 2 hiring, budget, commitments. "
        "Add a slot for the data platform migration Ines raised."
    )
    s.call(
        "create_document",
        {
            "title": "Q3 offsite agenda",
            "content": "Day 1: 09:30 retro; 11:00 roadmap; 14:00 data platform "
            "migration (Ines); 16:00 mobile release train (Tomás); 19:30 dinner.\nDay 2: 09:30 "
            "hiring; 11:00 "
            "budget; 14:00 commitments; 16:00 wrap-up.",
        },
        {"doc_id": "doc_9134", "url": "https://docs.acme.io/d/doc_9134"},
    )
    say(
        "Draft agenda: https://docs.acme.io/d/doc_9134. Day 1 retro, roadmap, the data migration "
        "(Ines) and the mobile "
        "release train (Tomás), dinner; day 2 hiring, budget, commitments."
    )
    s.user("Perfect. Move the budget before hiring, and tell the leads the agenda is up.")
    s.call(
        "update_document",
        {
            "doc_id": "doc_9134",
            "find": "09:30 hiring; 11:00 budget",
            "replace": "09:30 budget; 11:00 hiring",
        },
        {"doc_id": "doc_9134", "replacements": 1},
    )
    for lead in ("priya", "tomas", "ines", "kwame", "ruth"):
        s.call(
            "send_direct_message",
            {
                "to": f"{lead}@acme.io",
                "text": f"Hi {lead.title()}, the Q3 offsite agenda (June 5-6, Sintra) is up: "
                "https://docs.acme.io/d/doc_9134. Comments welcome by Friday.",
            },
            {"ok": True, "ts": f"17436{ord(lead[0]):03d}.000{len(lead)}"},
        )
    say("Agenda updated (budget now before hiring) and each lead got a message with the link.")
    s.user("Actually do the transfers now: everyone lands Wednesday afternoon.")
    s.call(
        "search_transfers",
        {"from": "LIS", "to": "Quinta da Serra, Sintra", "date": "2025-06-04", "passengers": 6},
        [
            {"id": "tr-van-1", "vehicle": "van (8 seats)", "price_eur": 140},
            {"id": "tr-cars-2", "vehicle": "2 sedans", "price_eur": 190},
        ],
    )
    s.call(
        "book_transfer",
        {"id": "tr-van-1", "pickup_time": "2025-06-04T16:30", "name_sign": "ACME offsite"},
        {"booking_id": "TR-4410", "status": "confirmed"},
    )
    say(
        "Booked a van (8 seats, €140) from Lisbon airport at 16:30 on Wednesday, June 4 "
        "(TR-4410). I'll send the "
        "leads the pickup details with their travel reminders."
    )
    s.user("thanks!")
    say("You're welcome! Enjoy the offsite.")
    return s.session()


# -- 13. a function-calling agent re-reads a record after updating it -----------------------------


def crm_update_and_reread() -> Session:
    s = Script(
        "crm-update-and-reread",
        "crm-agent",
        "mistral-large",
        "CRM clean-up: records updated and read back to check, one record re-read twice",
    )
    s.user(
        "Merge the duplicate Globex accounts, fix their billing contacts, and make sure the "
        "renewal is on the surviving one."
    )
    s.call(
        "search_accounts",
        {"query": "Globex", "limit": 10},
        [
            {"id": "ACC-1042", "name": "Globex Corporation", "owner": "j.mills"},
            {"id": "ACC-2271", "name": "Globex Corp.", "owner": "a.khan"},
            {"id": "ACC-3308", "name": "Globex Logistics GmbH", "owner": "a.khan"},
        ],
    )
    record = {
        "id": "ACC-1042",
        "name": "Globex Corporation",
        "domain": "globex.com",
        "tier": "enterprise",
        "billing_contact": "hank@globex.com",
        "renewal": None,
        "open_opportunities": 2,
    }
    s.call("get_account", {"id": "ACC-1042"}, record)
    s.call(
        "get_account",
        {"id": "ACC-2271"},
        {
            "id": "ACC-2271",
            "name": "Globex Corp.",
            "domain": "globex.com",
            "tier": "mid-market",
            "billing_contact": "ap@globex.com",
            "renewal": "2025-09-30",
            "open_opportunities": 1,
        },
        batched=True,
    )
    s.call(
        "get_account",
        {"id": "ACC-3308"},
        {
            "id": "ACC-3308",
            "name": "Globex Logistics GmbH",
            "domain": "globex-logistics.de",
            "tier": "smb",
            "billing_contact": "buchhaltung@globex-logistics.de",
            "renewal": "2026-01-31",
        },
        batched=True,
    )
    s.call(
        "list_contacts",
        {"account_id": "ACC-2271"},
        [
            {"id": "CT-88", "email": "ap@globex.com", "role": "billing"},
            {"id": "CT-91", "email": "mo@globex.com", "role": "champion"},
        ],
    )
    s.call(
        "list_opportunities",
        {"account_id": "ACC-2271"},
        [
            {
                "id": "OPP-5510",
                "name": "Globex renewal FY26",
                "stage": "negotiation",
                "amount": 84000,
                "close": "2025-09-30",
            }
        ],
    )
    s.reply(
        "ACC-1042 (Globex Corporation) and ACC-2271 (Globex Corp.) share globex.com and are "
        "duplicates; ACC-3308 is a "
        "separate German subsidiary. I'll keep ACC-1042 (enterprise, older) and merge ACC-2271 "
        "into it. OK?"
    )
    s.user("Yes, keep 1042.")
    s.call(
        "move_contacts",
        {"from_account": "ACC-2271", "to_account": "ACC-1042", "contact_ids": ["CT-88", "CT-91"]},
        {"moved": 2},
    )
    s.call(
        "move_opportunities",
        {"from_account": "ACC-2271", "to_account": "ACC-1042", "opportunity_ids": ["OPP-5510"]},
        {"moved": 1},
    )
    s.call(
        "update_account",
        {"id": "ACC-1042", "fields": {"billing_contact": "ap@globex.com", "renewal": "2025-09-30"}},
        {"id": "ACC-1042", "updated": ["billing_contact", "renewal"]},
    )
    record2 = dict(
        record, billing_contact="ap@globex.com", renewal="2025-09-30", open_opportunities=3
    )
    s.call("get_account", {"id": "ACC-1042"}, record2)
    s.call(
        "merge_accounts",
        {"survivor": "ACC-1042", "duplicate": "ACC-2271"},
        {"survivor": "ACC-1042", "merged": "ACC-2271", "status": "merged"},
    )
    s.call(
        "get_account",
        {"id": "ACC-2271"},
        None,
        error="404: account ACC-2271 was merged into ACC-1042",
    )
    s.call(
        "list_contacts",
        {"account_id": "ACC-1042"},
        [
            {"id": "CT-12", "email": "hank@globex.com", "role": "executive"},
            {"id": "CT-88", "email": "ap@globex.com", "role": "billing"},
            {"id": "CT-91", "email": "mo@globex.com", "role": "champion"},
            {"id": "CT-40", "email": "hank.s@globex.com", "role": "billing"},
        ],
    )
    s.reply(
        "Merged. ACC-1042 now has the renewal (Sept 30) and ap@globex.com as billing contact, but "
        "I see two "
        "billing-role contacts (ap@ and hank.s@). Should hank.s@ stay billing?"
    )
    s.user("No, hank.s is gone from Globex. Mark him inactive.")
    s.call(
        "update_contact",
        {"id": "CT-40", "fields": {"status": "inactive", "role": "former"}},
        {"id": "CT-40", "updated": ["status", "role"]},
    )
    s.call(
        "get_contact",
        {"id": "CT-40"},
        {"id": "CT-40", "email": "hank.s@globex.com", "status": "inactive", "role": "former"},
    )
    s.call("get_account", {"id": "ACC-1042"}, dict(record2, contacts_active=3))
    s.call(
        "list_opportunities",
        {"account_id": "ACC-1042"},
        [
            {
                "id": "OPP-5510",
                "name": "Globex renewal FY26",
                "stage": "negotiation",
                "amount": 84000,
            },
            {"id": "OPP-4120", "name": "Globex data add-on", "stage": "proposal", "amount": 22000},
            {"id": "OPP-3901", "name": "Globex training", "stage": "qualification", "amount": 6000},
        ],
    )
    s.call(
        "update_opportunity",
        {"id": "OPP-5510", "fields": {"owner": "j.mills"}},
        {"id": "OPP-5510", "updated": ["owner"]},
    )
    s.call(
        "get_opportunity",
        {"id": "OPP-5510"},
        {
            "id": "OPP-5510",
            "name": "Globex renewal FY26",
            "owner": "j.mills",
            "stage": "negotiation",
            "amount": 84000,
        },
    )
    s.reply(
        "Done: hank.s@ is inactive, and the FY26 renewal (OPP-5510, $84k) moved to j.mills, the "
        "owner of ACC-1042."
    )
    s.user("The data add-on should close this quarter, not next. And what stage is training at?")
    s.call(
        "get_opportunity",
        {"id": "OPP-4120"},
        {
            "id": "OPP-4120",
            "name": "Globex data add-on",
            "stage": "proposal",
            "amount": 22000,
            "close": "2025-10-15",
        },
    )
    s.call(
        "get_opportunity",
        {"id": "OPP-3901"},
        {
            "id": "OPP-3901",
            "name": "Globex training",
            "stage": "qualification",
            "amount": 6000,
            "close": "2025-11-30",
        },
        batched=True,
    )
    s.call(
        "update_opportunity",
        {"id": "OPP-4120", "fields": {"close": "2025-06-30"}},
        {"id": "OPP-4120", "updated": ["close"]},
    )
    s.call(
        "get_opportunity",
        {"id": "OPP-4120"},
        {
            "id": "OPP-4120",
            "name": "Globex data add-on",
            "stage": "proposal",
            "amount": 22000,
            "close": "2025-06-30",
            "forecast_category": "commit",
        },
    )
    s.reply(
        "OPP-4120 now closes June 30 (and moved to the 'commit' forecast). Training (OPP-3901, "
        "$6k) is in "
        "qualification, closing Nov 30."
    )
    s.user("ok leave training as is")
    s.reply("Okay, training stays as it is.")
    s.user(
        "Also the subsidiary: make sure it's linked as a child of 1042 and has a German billing "
        "address."
    )
    s.call(
        "get_account",
        {"id": "ACC-3308"},
        {
            "id": "ACC-3308",
            "name": "Globex Logistics GmbH",
            "parent": None,
            "billing_address": None,
            "billing_contact": "buchhaltung@globex-logistics.de",
        },
    )
    s.call(
        "update_account",
        {
            "id": "ACC-3308",
            "fields": {
                "parent": "ACC-1042",
                "billing_address": {
                    "street": "Speicherstadt 4",
                    "city": "Hamburg",
                    "postcode": "20457",
                    "country": "DE",
                },
            },
        },
        {"id": "ACC-3308", "updated": ["parent", "billing_address"]},
    )
    s.call(
        "get_account",
        {"id": "ACC-3308"},
        {
            "id": "ACC-3308",
            "name": "Globex Logistics GmbH",
            "parent": "ACC-1042",
            "billing_address": {
                "street": "Speicherstadt 4",
                "city": "Hamburg",
                "postcode": "20457",
                "country": "DE",
            },
            "billing_contact": "buchhaltung@globex-logistics.de",
        },
    )
    s.call(
        "validate_vat",
        {"country": "DE", "number": "DE287654321"},
        {"valid": True, "name": "Globex Logistics GmbH"},
    )
    s.call(
        "update_account",
        {"id": "ACC-3308", "fields": {"vat_id": "DE287654321"}},
        {"id": "ACC-3308", "updated": ["vat_id"]},
    )
    s.call(
        "get_account_hierarchy",
        {"id": "ACC-1042"},
        {"id": "ACC-1042", "children": [{"id": "ACC-3308", "name": "Globex Logistics GmbH"}]},
    )
    s.reply(
        "ACC-3308 is now a child of ACC-1042, with its Hamburg billing address and a validated "
        "VAT id."
    )
    s.user("Great. Last: log a note on 1042 summarizing all this.")
    s.call(
        "create_note",
        {
            "account_id": "ACC-1042",
            "body": "Merged ACC-2271 (duplicate) into this account; renewal OPP-5510 "
            "(Sept 30, $84k) moved here, owner j.mills; billing contact ap@globex.com; hank.s@ "
            "inactive; "
            "ACC-3308 linked as child with DE billing address and VAT.",
        },
        {"note_id": "N-60311", "account_id": "ACC-1042"},
    )
    s.call("get_account", {"id": "ACC-1042"}, dict(record2, contacts_active=3, children=1, notes=1))
    s.call(
        "list_audit_log",
        {"account_id": "ACC-1042", "limit": 8},
        [
            {"action": a}
            for a in (
                "merge",
                "update",
                "move_contacts",
                "move_opportunities",
                "update_opportunity",
                "note",
            )
        ],
    )
    s.reply("Logged note N-60311 on ACC-1042. Everything is consistent in the audit log.")
    s.user("thanks")
    s.reply("Anytime!")
    return s.session()


# -- 14. exploration: sed -n views at changing lines, grep -n, cat, ls -----------------------------


def explore_with_sed_views() -> Session:
    s = Script(
        "explore-with-sed-views",
        "codex-exec",
        "gpt-5-codex",
        "a codebase read to answer a question: ls, cat, grep -n, sed -n 'N,Mp' at many ranges",
    )
    s.user("How does the scheduler decide when to retry a failed job? Point me to the code.")
    s.sh("ls", "Makefile\nREADME.md\ncmd\ndocs\ngo.mod\ngo.sum\ninternal\npkg")
    s.sh("ls internal", "api\nconfig\nqueue\nscheduler\nstore\nworker")
    s.sh(
        "ls internal/scheduler internal/queue",
        "internal/queue:\nbackoff.go\nbackoff_test.go\nqueue.go\nredis.go\n\n"
        "internal/scheduler:\nleases.go\nscheduler.go\nscheduler_test.go\ntick.go",
    )
    s.sh(
        "wc -l internal/scheduler/*.go internal/queue/*.go",
        "  143 internal/scheduler/leases.go\n  611 internal/scheduler/scheduler.go\n"
        "  402 internal/scheduler/scheduler_test.go\n   97 internal/scheduler/tick.go\n   88 "
        "internal/queue/backoff.go\n"
        "  120 internal/queue/backoff_test.go\n  356 internal/queue/queue.go\n  290 "
        "internal/queue/redis.go\n 2107 total",
    )
    s.sh(
        "grep -n 'retry\\|Retry' internal/scheduler/scheduler.go | head -30",
        "41:\tmaxRetries int\n212:func (s *Scheduler) onFailure(ctx context.Context, j *Job, err "
        "error) {\n"
        "219:\tif j.Attempts >= s.maxRetries {\n231:\tdelay := s.backoff.Next(j.Attempts)\n"
        "240:\t\treturn s.retryLater(ctx, j, delay)\n388:func (s *Scheduler) retryLater(ctx "
        "context.Context, j *Job, d time.Duration) error {\n"
        "402:\t// retries keep their original priority",
    )
    views = [
        (
            200,
            260,
            "func (s *Scheduler) onFailure(ctx context.Context, j *Job, err error) {\n"
            "\tj.Attempts++\n\tif errors.Is(err, ErrPermanent) {\n"
            "\t\treturn s.dead(ctx, j, err)\n\t}\n\tif j.Attempts >= s.maxRetries {\n\t\treturn "
            "s.dead(ctx, j, err)\n\t}\n\tdelay := s.backoff.Next(j.Attempts)",
        ),
        (
            380,
            420,
            "func (s *Scheduler) retryLater(ctx context.Context, j *Job, d time.Duration) error {\n"
            "\tat := s.clock.Now().Add(d)\n"
            "\t// retries keep their original priority\n\treturn s.queue.Schedule(ctx, j, at, "
            "j.Priority)\n}",
        ),
        (
            1,
            60,
            "package scheduler\n\ntype Scheduler struct {\n\tqueue   *queue.Queue\n\tbackoff "
            "queue.Backoff\n\tclock   Clock\n\tmaxRetries int\n}",
        ),
        (
            60,
            120,
            "func New(cfg config.Scheduler, q *queue.Queue) *Scheduler {\n\treturn &Scheduler{\n"
            "\t\tqueue: q,\n"
            "\t\tbackoff: queue.Exponential(cfg.RetryBase, cfg.RetryMax, cfg.Jitter),\n"
            "\t\tmaxRetries: cfg.MaxRetries,\n\t}\n}",
        ),
    ]
    for start, end, text in views:
        s.sh(f"sed -n '{start},{end}p' internal/scheduler/scheduler.go", text)
    s.sh(
        "cat internal/queue/backoff.go",
        "package queue\n\ntype Backoff interface{ Next(attempt int) time.Duration }\n\n"
        "type exponential struct{ base, max time.Duration; jitter float64 }\n\nfunc (e "
        "exponential) Next(attempt int) time.Duration {\n"
        "\td := e.base << (attempt - 1)\n\tif d > e.max || d <= 0 {\n\t\td = e.max\n\t}\n\treturn "
        "applyJitter(d, e.jitter)\n}",
    )
    s.sh(
        "grep -rn 'func applyJitter' internal",
        "internal/queue/backoff.go:71:func applyJitter(d time.Duration, f float64) time.Duration {",
    )
    s.sh(
        "sed -n '66,88p' internal/queue/backoff.go",
        "// applyJitter spreads retries of jobs that failed together.\n"
        "func applyJitter(d time.Duration, f float64) time.Duration {\n\tspread := float64(d) * f\n"
        "\treturn d - time.Duration(spread) + time.Duration(rand.Float64()*2*spread)\n}",
    )
    s.sh(
        "grep -rn 'RetryBase\\|RetryMax\\|MaxRetries\\|Jitter' internal/config",
        'internal/config/config.go:48:\tRetryBase  time.Duration `env:"RETRY_BASE" default:"2s"`\n'
        'internal/config/config.go:49:\tRetryMax   time.Duration `env:"RETRY_MAX" default:"10m"`\n'
        'internal/config/config.go:50:\tMaxRetries int           `env:"MAX_RETRIES" default:"8"`\n'
        'internal/config/config.go:51:\tJitter     float64       `env:"RETRY_JITTER" '
        'default:"0.2"`',
    )
    s.sh(
        "sed -n '30,70p' internal/config/config.go",
        'type Scheduler struct {\n\tTick       time.Duration `env:"TICK" default:"1s"`\n'
        '\tRetryBase  time.Duration `env:"RETRY_BASE" default:"2s"`\n\tRetryMax   time.Duration '
        '`env:"RETRY_MAX" default:"10m"`',
    )
    s.sh(
        "grep -n 'ErrPermanent' -r internal | head",
        'internal/scheduler/errors.go:9:var ErrPermanent = errors.New("permanent failure")\n'
        "internal/scheduler/scheduler.go:214:\tif errors.Is(err, ErrPermanent) {\n"
        'internal/worker/http.go:77:\t\treturn fmt.Errorf("status %d: %w", resp.StatusCode, '
        "scheduler.ErrPermanent)",
    )
    s.sh(
        "sed -n '60,95p' internal/worker/http.go",
        '\tswitch {\n\tcase resp.StatusCode >= 500:\n\t\treturn fmt.Errorf("status %d", '
        "resp.StatusCode)\n"
        "\tcase resp.StatusCode == 429:\n\t\treturn RetryAfter(resp)\n\tcase resp.StatusCode >= "
        "400:\n"
        '\t\treturn fmt.Errorf("status %d: %w", resp.StatusCode, scheduler.ErrPermanent)\n\t}',
    )
    s.sh(
        "grep -n 'func RetryAfter' -A18 internal/worker/http.go",
        "101:func RetryAfter(resp *http.Response) error {\n"
        '102-\tsecs, err := strconv.Atoi(resp.Header.Get("Retry-After"))\n103-\tif err != nil {\n'
        '104-\t\treturn errors.New("rate limited")\n'
        "105-\t}\n106-\treturn &retryAfterError{d: time.Duration(secs) * time.Second}",
    )
    s.sh(
        "grep -rn 'retryAfterError' internal",
        "internal/worker/http.go:106:\treturn &retryAfterError{d: time.Duration(secs) * "
        "time.Second}\n"
        "internal/worker/http.go:112:type retryAfterError struct{ d time.Duration }\n"
        "internal/scheduler/scheduler.go:226:\tvar ra interface{ RetryAfter() time.Duration }",
    )
    s.sh(
        "sed -n '224,240p' internal/scheduler/scheduler.go",
        "\tvar ra interface{ RetryAfter() time.Duration }\n\tif errors.As(err, &ra) {\n"
        "\t\tdelay = max(delay, ra.RetryAfter())\n\t}\n\ts.metrics.Retries.Inc()",
    )
    s.sh(
        "sed -n '120,175p' internal/scheduler/scheduler.go",
        "func (s *Scheduler) dispatch(ctx context.Context, id string) {\n"
        "\tlease, ok := s.leases.Acquire(ctx, id, s.leaseTTL)\n\tif !ok {\n\t\treturn // another "
        "scheduler has it\n\t}\n"
        "\tgo s.run(ctx, id, lease)\n}",
    )
    s.sh(
        "sed -n '175,200p' internal/scheduler/scheduler.go",
        "func (s *Scheduler) run(ctx context.Context, id string, l Lease) {\n"
        "\tdefer l.Release()\n\tj, err := s.queue.Load(ctx, id)\n\tif err != nil {\n\t\treturn\n"
        "\t}\n"
        "\tif err := s.worker.Do(ctx, j); err != nil {\n\t\t_ = s.onFailure(ctx, j, err)\n\t}\n}",
    )
    s.sh(
        "grep -n 'func ' internal/scheduler/leases.go",
        "18:func (l *Leases) Acquire(ctx context.Context, id string, ttl time.Duration) (Lease, "
        "bool) {\n"
        "57:func (l Lease) Renew(ctx context.Context) error {\n92:func (l Lease) Release() {",
    )
    s.sh(
        "sed -n '18,56p' internal/scheduler/leases.go",
        "func (l *Leases) Acquire(ctx context.Context, id string, ttl time.Duration) (Lease, "
        "bool) {\n"
        '\tok, err := l.c.SetNX(ctx, "lease:"+id, l.owner, ttl).Result()\n\tif err != nil || !ok '
        "{\n\t\treturn Lease{}, false\n\t}",
    )
    s.sh(
        "sed -n '1,40p' internal/scheduler/tick.go",
        "func (s *Scheduler) tick(ctx context.Context) {\n\tdue, err := s.queue.Due(ctx, "
        "s.clock.Now(), 100)\n"
        '\tif err != nil {\n\t\ts.log.Warn("due", "err", err)\n\t\treturn\n\t}\n\tfor _, j := '
        "range due {\n\t\ts.dispatch(ctx, j)\n\t}\n}",
    )
    s.sh(
        "grep -n 'func (q \\*Queue) Schedule' -A25 internal/queue/queue.go",
        "144:func (q *Queue) Schedule(ctx context.Context, j *Job, at time.Time, prio int) error "
        "{\n"
        "145-\tscore := float64(at.UnixMilli())\n146-\treturn q.store.ZAdd(ctx, q.key(prio), "
        "score, j.ID)",
    )
    s.sh(
        "sed -n '280,330p' internal/queue/redis.go",
        "func (r *redisStore) Due(ctx context.Context, now time.Time, n int) ([]string, error) {\n"
        "\treturn r.c.ZRangeByScore(ctx, r.ready, &redis.ZRangeBy{Max: "
        "strconv.FormatInt(now.UnixMilli(), 10), Count: int64(n)}).Result()\n}",
    )
    s.sh(
        "grep -n 'func Test' internal/queue/backoff_test.go",
        "12:func TestExponentialDoubles(t *testing.T) {\n31:func TestExponentialCaps(t "
        "*testing.T) {\n"
        "55:func TestJitterBounds(t *testing.T) {\n88:func TestOverflowCaps(t *testing.T) {",
    )
    s.sh(
        "sed -n '88,120p' internal/queue/backoff_test.go",
        "func TestOverflowCaps(t *testing.T) {\n\tb := Exponential(2*time.Second, 10*time.Minute, "
        "0)\n"
        '\tif got := b.Next(64); got != 10*time.Minute {\n\t\tt.Fatalf("got %v", got)\n\t}\n}',
    )
    s.sh(
        "go test ./internal/queue/ -run 'Exponential|Overflow|Jitter' -v 2>&1 | tail -6",
        "=== RUN   TestExponentialDoubles\n--- PASS: TestExponentialDoubles (0.00s)\n--- PASS: "
        "TestExponentialCaps (0.00s)\n"
        "--- PASS: TestJitterBounds (0.01s)\n--- PASS: TestOverflowCaps (0.00s)\nok  "
        "\tgithub.com/acme/jobs/internal/queue\t0.014s",
    )
    s.sh(
        "git log --oneline -5 -- internal/scheduler/scheduler.go",
        "e41f0a2 scheduler: honour Retry-After\n"
        "b7c3d19 scheduler: permanent errors skip retries\n0a9e551 scheduler: exponential backoff "
        "with jitter\n"
        "5d2c8e0 scheduler: lease renewal\n1c0ffee scheduler: initial",
    )
    s.sh(
        "git show e41f0a2 --stat",
        "commit e41f0a2\n    scheduler: honour Retry-After\n\n internal/scheduler/scheduler.go | "
        "5 +++++\n"
        " internal/worker/http.go         | 21 +++++++++++++++++++++\n 2 files changed, 26 "
        "insertions(+)",
    )
    s.sh("ls docs", "architecture.md\noperations.md\nretries.md")
    s.sh(
        "cat docs/retries.md",
        "# Retries\n\nJobs are retried with exponential backoff (RETRY_BASE, doubling, capped at "
        "RETRY_MAX) "
        "up to MAX_RETRIES times. 4xx responses other than 429 are permanent.",
    )
    s.sh(
        "grep -n 'dead' internal/scheduler/scheduler.go",
        "216:\t\treturn s.dead(ctx, j, err)\n220:\t\treturn s.dead(ctx, j, err)\n"
        "455:func (s *Scheduler) dead(ctx context.Context, j *Job, err error) error {",
    )
    s.sh(
        "sed -n '455,480p' internal/scheduler/scheduler.go",
        "func (s *Scheduler) dead(ctx context.Context, j *Job, err error) error {\n"
        "\ts.metrics.Dead.Inc()\n\treturn s.queue.MoveToDeadLetter(ctx, j, err.Error())\n}",
    )
    s.sh(
        "ls cmd && sed -n '1,30p' cmd/jobsd/main.go",
        "jobsctl\njobsd\npackage main\n\nfunc main() {\n\tcfg := config.MustLoad()\n"
        "\tq := queue.New(redis.MustConnect(cfg.Redis))\n\ts := scheduler.New(cfg.Scheduler, q)\n"
        "\ts.Run(ctx)\n}",
    )
    s.sh(
        "grep -rn 'dead-letter\\|DeadLetter' cmd/jobsctl | head -5",
        "cmd/jobsctl/requeue.go:22:\t// requeue moves jobs from the dead-letter set back to ready\n"
        "cmd/jobsctl/requeue.go:31:\tids, err := q.DeadLetter(ctx, limit)",
    )
    s.reply(
        "Retries are decided in `Scheduler.onFailure` (internal/scheduler/scheduler.go:212):\n"
        "1. `ErrPermanent` (any 4xx except 429, from internal/worker/http.go:77) goes straight to "
        "the dead-letter set.\n"
        "2. After `MAX_RETRIES` (default 8) attempts, dead-letter too.\n"
        "3. Otherwise the delay is `backoff.Next(attempts)`: RETRY_BASE (2s) doubled per attempt, "
        "capped at RETRY_MAX "
        "(10m), with ±20 % jitter (internal/queue/backoff.go:71), and at least the server's "
        "Retry-After (scheduler.go:226).\n"
        "4. `retryLater` re-schedules the job in the Redis sorted set at now+delay with its "
        "original priority; "
        "the 1s tick picks it up when due. Dead-lettered jobs can be requeued with `jobsctl "
        "requeue`."
    )
    s.user("Does the Retry-After path respect the cap?")
    s.sh(
        "sed -n '226,236p' internal/scheduler/scheduler.go",
        "\tvar ra interface{ RetryAfter() time.Duration }\n\tif errors.As(err, &ra) {\n"
        "\t\tdelay = max(delay, ra.RetryAfter())\n\t}\n\ts.metrics.Retries.Inc()\n\treturn "
        "s.retryLater(ctx, j, delay)",
    )
    s.sh(
        "grep -n 'RetryAfter' internal/scheduler/scheduler_test.go",
        "311:func TestRetryAfterExtendsBackoff(t *testing.T) {",
    )
    s.sh(
        "sed -n '311,340p' internal/scheduler/scheduler_test.go",
        "func TestRetryAfterExtendsBackoff(t *testing.T) {\n"
        "\ts := newTestScheduler(t, config.Scheduler{RetryBase: time.Second, RetryMax: "
        "time.Minute})\n"
        "\terr := &fakeRetryAfter{d: 30 * time.Second}\n\t...\n\tassertScheduledIn(t, s, "
        "30*time.Second)\n}",
    )
    s.reply(
        "No: `max(delay, RetryAfter)` is applied after the backoff's cap, so a server sending "
        "`Retry-After: 3600` "
        "delays the job an hour even with RETRY_MAX=10m. Clamp it with `min(..., cfg.RetryMax)` "
        "if that's unintended."
    )
    return s.session()


# -- 15. a data pipeline: run_query(sql=...) with a new query each time ----------------------------


def warehouse_queries() -> Session:
    s = Script(
        "warehouse-queries",
        "analytics-agent",
        "claude-sonnet-4-5",
        "a churn analysis through run_query(sql=...): schema, counts, joins, a typo fixed, a view "
        "made",
    )
    s.user("Why did churn jump in February? Use the warehouse.")

    def q(sql: str, result: str, error: str | None = None) -> None:
        s.call("run_query", {"sql": sql}, None if error else result, error=error)

    q(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'analytics' ORDER "
        "BY 1",
        rows(
            ["table_name"],
            [
                ["accounts"],
                ["events"],
                ["invoices"],
                ["plans"],
                ["subscriptions"],
                ["support_tickets"],
            ],
        ),
    )
    q(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = "
        "'subscriptions'",
        rows(
            ["column_name", "data_type"],
            [
                ["id", "bigint"],
                ["account_id", "bigint"],
                ["plan_id", "int"],
                ["started_at", "timestamp"],
                ["cancelled_at", "timestamp"],
                ["cancel_reason", "text"],
            ],
        ),
    )
    monthly = [
        ("2024-10", 212, 9814),
        ("2024-11", 198, 9903),
        ("2024-12", 231, 9950),
        ("2025-01", 224, 10122),
        ("2025-02", 418, 10187),
        ("2025-03", 240, 9991),
    ]
    q(
        "SELECT date_trunc('month', cancelled_at)::date AS month, count(*) AS churned FROM "
        "analytics.subscriptions "
        "WHERE cancelled_at >= '2024-10-01' GROUP BY 1 ORDER BY 1",
        rows(["month", "churned"], [[m + "-01", c] for m, c, _ in monthly]),
    )
    q(
        "SELECT m.month, c.churned, a.active, round(100.0 * c.churned / a.active, 2) AS rate FROM "
        "monthly_churn c "
        "JOIN monthly_active a USING (month) ORDER BY month",
        "",
        error='ERROR:  relation "monthly_churn" does not exist\nLINE 1: ...',
    )
    q(
        "WITH c AS (SELECT date_trunc('month', cancelled_at) AS month, count(*) AS churned FROM "
        "analytics.subscriptions "
        "GROUP BY 1), a AS (SELECT date_trunc('month', d) AS month, count(DISTINCT s.id) AS "
        "active FROM "
        "generate_series('2024-10-01'::date, '2025-03-01', '1 month') d JOIN "
        "analytics.subscriptions s ON s.started_at <= d "
        "AND (s.cancelled_at IS NULL OR s.cancelled_at > d) GROUP BY 1) SELECT a.month::date, "
        "churned, active, "
        "round(100.0 * churned / active, 2) AS rate FROM a JOIN c USING (month) ORDER BY 1",
        rows(
            ["month", "churned", "active", "rate"],
            [[m + "-01", c, a, round(100 * c / a, 2)] for m, c, a in monthly],
        ),
    )
    q(
        "SELECT cancel_reason, count(*) FROM analytics.subscriptions WHERE cancelled_at >= "
        "'2025-02-01' AND cancelled_at < '2025-03-01' "
        "GROUP BY 1 ORDER BY 2 DESC",
        rows(
            ["cancel_reason", "count"],
            [
                ["payment_failed", 201],
                ["too_expensive", 88],
                ["missing_feature", 61],
                ["switched_competitor", 40],
                [None, 28],
            ],
        ),
    )
    q(
        "SELECT cancel_reason, count(*) FROM analytics.subscriptions WHERE cancelled_at >= "
        "'2025-01-01' AND cancelled_at < '2025-02-01' "
        "GROUP BY 1 ORDER BY 2 DESC",
        rows(
            ["cancel_reason", "count"],
            [
                ["too_expensive", 81],
                ["missing_feature", 57],
                ["switched_competitor", 44],
                ["payment_failed", 19],
                [None, 23],
            ],
        ),
    )
    q(
        "SELECT count(*), count(DISTINCT id) FROM analytics.subscriptions",
        rows(["count", "count"], [[61240, 61240]]),
    )
    q(
        "SELECT count(*) FROM analytics.subscriptions WHERE cancelled_at < started_at",
        rows(["count"], [[0]]),
    )
    q(
        "SELEC date_trunc('day', cancelled_at)::date, count(*) FROM analytics.subscriptions WHERE "
        "cancel_reason = 'payment_failed' "
        "AND cancelled_at >= '2025-02-01' GROUP BY 1",
        "",
        error='ERROR:  syntax error at or near "SELEC"\nLINE 1: SELEC date_trunc(...',
    )
    q(
        "SELECT date_trunc('day', cancelled_at)::date, count(*) FROM analytics.subscriptions "
        "WHERE cancel_reason = 'payment_failed' "
        "AND cancelled_at >= '2025-02-01' AND cancelled_at < '2025-03-01' GROUP BY 1 ORDER BY 2 "
        "DESC LIMIT 5",
        rows(
            ["date_trunc", "count"],
            [
                ["2025-02-12", 52],
                ["2025-02-13", 47],
                ["2025-02-11", 22],
                ["2025-02-14", 15],
                ["2025-02-17", 9],
            ],
        ),
    )
    q(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cancelled_at - started_at) FROM "
        "analytics.subscriptions "
        "WHERE cancel_reason = 'payment_failed' AND cancelled_at BETWEEN '2025-02-10' AND "
        "'2025-02-20'",
        rows(["percentile_cont"], [["412 days 03:10:00"]]),
    )
    q(
        "SELECT processor, count(*) FROM analytics.invoices WHERE attempted_at >= '2025-02-01' "
        "AND attempted_at < '2025-03-01' GROUP BY 1",
        rows(["processor", "count"], [["adyen", 6211], ["stripe", 4420]]),
    )
    q(
        "SELECT subject, count(*) FROM analytics.support_tickets WHERE created_at BETWEEN "
        "'2025-02-10' AND '2025-02-17' "
        "GROUP BY 1 ORDER BY 2 DESC LIMIT 5",
        rows(
            ["subject", "count"],
            [
                ["Card declined on renewal", 64],
                ["Can't log in", 21],
                ["Invoice copy", 12],
                ["Payment failed but card is fine", 9],
                ["Export is slow", 4],
            ],
        ),
    )
    q(
        "SELECT date_trunc('day', created_at)::date, count(*) FROM analytics.support_tickets "
        "WHERE subject ILIKE '%card%' "
        "AND created_at BETWEEN '2025-02-05' AND '2025-02-20' GROUP BY 1 ORDER BY 1",
        rows(
            ["date_trunc", "count"],
            [
                [f"2025-02-{d:02d}", c]
                for d, c in zip(
                    range(5, 20), [1, 0, 2, 1, 0, 1, 18, 26, 19, 6, 2, 1, 0, 1, 0], strict=True
                )
            ],
        ),
    )
    q(
        "SELECT date_trunc('week', cancelled_at)::date AS week, count(*) FROM "
        "analytics.subscriptions "
        "WHERE cancel_reason = 'payment_failed' AND cancelled_at >= '2025-01-15' AND cancelled_at "
        "< '2025-03-15' GROUP BY 1 ORDER BY 1",
        rows(
            ["week", "count"],
            [
                ["2025-01-13", 4],
                ["2025-01-20", 5],
                ["2025-01-27", 6],
                ["2025-02-03", 17],
                ["2025-02-10", 121],
                ["2025-02-17", 44],
                ["2025-02-24", 19],
                ["2025-03-03", 6],
                ["2025-03-10", 5],
            ],
        ),
    )
    q(
        "SELECT i.processor, i.failure_code, count(*) FROM analytics.invoices i WHERE i.status = "
        "'failed' "
        "AND i.attempted_at >= '2025-02-10' AND i.attempted_at < '2025-02-17' GROUP BY 1, 2 ORDER "
        "BY 3 DESC LIMIT 10",
        rows(
            ["processor", "failure_code", "count"],
            [
                ["stripe", "card_declined", 38],
                ["adyen", "refused_3ds_required", 162],
                ["stripe", "expired_card", 12],
                ["adyen", "insufficient_funds", 9],
            ],
        ),
    )
    q(
        "SELECT date_trunc('day', attempted_at)::date AS day, count(*) FILTER (WHERE failure_code "
        "= 'refused_3ds_required') AS sca, "
        "count(*) AS failed FROM analytics.invoices WHERE processor = 'adyen' AND status = "
        "'failed' AND attempted_at >= '2025-02-05' "
        "AND attempted_at < '2025-02-20' GROUP BY 1 ORDER BY 1",
        rows(
            ["day", "sca", "failed"],
            [
                [f"2025-02-{d:02d}", sca, sca + 3 + d % 4]
                for d, sca in zip(
                    range(5, 20), [0, 0, 1, 0, 0, 2, 57, 61, 44, 12, 3, 1, 0, 0, 1], strict=True
                )
            ],
        ),
    )
    q(
        "SELECT count(DISTINCT account_id) FROM analytics.invoices WHERE failure_code = "
        "'refused_3ds_required' AND attempted_at >= '2025-02-11'",
        rows(["count"], [[171]]),
    )
    q(
        "SELECT p.country, count(*) FROM analytics.invoices i JOIN analytics.accounts p ON p.id = "
        "i.account_id "
        "WHERE i.failure_code = 'refused_3ds_required' AND i.attempted_at >= '2025-02-11' GROUP "
        "BY 1 ORDER BY 2 DESC LIMIT 5",
        rows(["country", "count"], [["DE", 61], ["FR", 44], ["NL", 29], ["IT", 21], ["ES", 16]]),
    )
    q(
        "SELECT event_type, count(*) FROM analytics.events WHERE event_type LIKE 'payment.%' AND "
        "occurred_at >= '2025-02-10' "
        "AND occurred_at < '2025-02-14' GROUP BY 1 ORDER BY 2 DESC",
        rows(
            ["event_type", "count"],
            [
                ["payment.attempted", 3021],
                ["payment.failed", 261],
                ["payment.challenge_shown", 0],
                ["payment.succeeded", 2760],
            ],
        ),
    )
    q(
        "SELECT min(occurred_at), max(occurred_at) FROM analytics.events WHERE event_type = "
        "'payment.challenge_shown'",
        rows(["min", "max"], [["2024-03-02 10:11:09", "2025-02-10 23:58:41"]]),
    )
    q(
        "SELECT count(*) FROM analytics.events WHERE event_type = 'payment.challenge_shown' AND "
        "occurred_at >= '2025-02-14'",
        rows(["count"], [[0]]),
    )
    q(
        "SELECT release, deployed_at FROM analytics.deploys WHERE service = 'checkout' AND "
        "deployed_at BETWEEN '2025-02-08' AND '2025-02-15'",
        "",
        error='ERROR:  relation "analytics.deploys" does not exist',
    )
    q(
        "SELECT table_schema, table_name FROM information_schema.tables WHERE table_name ILIKE "
        "'%deploy%'",
        rows(["table_schema", "table_name"], [["ops", "deployments"]]),
    )
    q(
        "SELECT service, version, finished_at FROM ops.deployments WHERE service = 'checkout' AND "
        "finished_at BETWEEN '2025-02-08' AND '2025-02-15' ORDER BY 3",
        rows(
            ["service", "version", "finished_at"],
            [
                ["checkout", "4.12.0", "2025-02-10 22:40:13"],
                ["checkout", "4.12.1", "2025-02-13 16:05:52"],
            ],
        ),
    )
    q(
        "SELECT count(*) FILTER (WHERE cancelled_at IS NOT NULL) AS churned, count(*) AS affected "
        "FROM analytics.subscriptions s "
        "WHERE s.account_id IN (SELECT account_id FROM analytics.invoices WHERE failure_code = "
        "'refused_3ds_required' "
        "AND attempted_at BETWEEN '2025-02-10 22:40' AND '2025-02-13 16:06')",
        rows(["churned", "affected"], [[168, 171]]),
    )
    q(
        "SELECT plan_id, count(*) FROM analytics.subscriptions WHERE cancel_reason = "
        "'payment_failed' AND cancelled_at BETWEEN "
        "'2025-02-10' AND '2025-02-20' GROUP BY 1 ORDER BY 2 DESC",
        rows(["plan_id", "count"], [[2, 97], [3, 51], [1, 23]]),
    )
    q(
        "SELECT id, name, monthly_price FROM analytics.plans ORDER BY id",
        rows(
            ["id", "name", "monthly_price"],
            [[1, "starter", 19], [2, "team", 49], [3, "business", 129]],
        ),
    )
    q(
        "SELECT sum(p.monthly_price) FROM analytics.subscriptions s JOIN analytics.plans p ON "
        "p.id = s.plan_id "
        "WHERE s.cancel_reason = 'payment_failed' AND s.cancelled_at BETWEEN '2025-02-10' AND "
        "'2025-02-20'",
        rows(["sum"], [[11789]]),
    )
    q(
        "SELECT count(*) FROM analytics.subscriptions WHERE account_id IN (SELECT account_id FROM "
        "analytics.invoices "
        "WHERE failure_code = 'refused_3ds_required' AND attempted_at BETWEEN '2025-02-10 22:40' "
        "AND '2025-02-13 16:06') "
        "AND started_at > '2025-02-13 16:06'",
        rows(["count"], [[23]]),
    )
    q(
        "CREATE OR REPLACE VIEW analytics.monthly_churn AS SELECT date_trunc('month', "
        "cancelled_at)::date AS month, "
        "cancel_reason, count(*) AS churned FROM analytics.subscriptions WHERE cancelled_at IS "
        "NOT NULL GROUP BY 1, 2",
        "CREATE VIEW",
    )
    q(
        "SELECT month, sum(churned) FROM analytics.monthly_churn WHERE month >= '2024-10-01' "
        "GROUP BY 1 ORDER BY 1",
        rows(["month", "sum"], [[m + "-01", c] for m, c, _ in monthly]),
    )
    q("GRANT SELECT ON analytics.monthly_churn TO reporting", "GRANT")
    q(
        "SELECT month, churned FROM analytics.monthly_churn WHERE cancel_reason = "
        "'payment_failed' ORDER BY month DESC LIMIT 6",
        rows(
            ["month", "churned"],
            [
                ["2025-03-01", 21],
                ["2025-02-01", 201],
                ["2025-01-01", 19],
                ["2024-12-01", 22],
                ["2024-11-01", 18],
                ["2024-10-01", 20],
            ],
        ),
    )
    s.call(
        "create_chart",
        {
            "title": "Monthly churn by reason",
            "source": "analytics.monthly_churn",
            "x": "month",
            "y": "churned",
            "series": "cancel_reason",
            "type": "stacked_bar",
        },
        {"chart_id": "ch_2291", "url": "https://bi.acme.io/c/ch_2291"},
    )
    s.reply(
        "February's jump (418 vs about 220 a month) is almost all `payment_failed` (201 vs about "
        "20). Checkout 4.12.0, "
        "deployed Feb 10 22:40, stopped showing the 3-D Secure challenge (no "
        "`payment.challenge_shown` events until "
        "4.12.1 on Feb 13 16:06), so Adyen refused 171 accounts' renewals with "
        "`refused_3ds_required`, mostly in the EU. "
        "168 of them churned (about $11.8k MRR); 23 have since re-subscribed. Chart: "
        "https://bi.acme.io/c/ch_2291; "
        "the new view analytics.monthly_churn is readable by reporting."
    )
    s.user("Can you list the 145 who haven't come back so CS can reach out?")
    q(
        "SELECT a.id, a.name, a.owner_email FROM analytics.accounts a WHERE a.id IN (SELECT "
        "account_id FROM analytics.invoices "
        "WHERE failure_code = 'refused_3ds_required' AND attempted_at BETWEEN '2025-02-10 22:40' "
        "AND '2025-02-13 16:06') "
        "AND NOT EXISTS (SELECT 1 FROM analytics.subscriptions s WHERE s.account_id = a.id AND "
        "s.cancelled_at IS NULL) ORDER BY a.name",
        rows(
            ["id", "name", "owner_email"],
            [[40000 + k * 37, f"Account {k}", f"owner{k}@example.com"] for k in range(5)],
        ).replace("(5 rows)", "(145 rows, 5 shown)"),
    )
    q(
        "COPY (SELECT a.id, a.name, a.owner_email FROM analytics.accounts a WHERE a.id IN (SELECT "
        "account_id FROM analytics.invoices "
        "WHERE failure_code = 'refused_3ds_required' AND attempted_at BETWEEN '2025-02-10 22:40' "
        "AND '2025-02-13 16:06') "
        "AND NOT EXISTS (SELECT 1 FROM analytics.subscriptions s WHERE s.account_id = a.id AND "
        "s.cancelled_at IS NULL)) "
        "TO 's3://acme-exports/cs/3ds-winback.csv' WITH CSV HEADER",
        "COPY 145",
    )
    s.reply(
        "Exported the 145 accounts (id, name, owner email) to s3://acme-exports/cs/3ds-winback.csv."
    )
    return s.session()


# -- 16. a script written with a heredoc, run, rewritten, run again until it works -----------------


def heredoc_script_until_it_works() -> Session:
    s = Script(
        "heredoc-script-until-it-works",
        "mini-swe-agent",
        "claude-sonnet-4",
        "a CSV de-duplication script written by heredoc, run, rewritten with new content until it "
        "works",
    )
    s.sh(
        "ls data && head -5 data/contacts.csv",
        "contacts.csv\ncontacts_2024.csv\nemail,first_name,last_name,phone,updated\n"
        "ana@example.com,Ana,Silva,+351 912 000 111,2024-03-02\nANA@example.com "
        ",Ana,Silva,,2024-05-10\n"
        'bo@example.org,Bo,Berg,+46 70 123 45 67,2023-11-20\n"chen, '
        'li"@example.com,Li,Chen,,2024-01-09',
    )
    s.sh(
        "wc -l data/*.csv",
        "  48213 data/contacts.csv\n  12007 data/contacts_2024.csv\n  60220 total",
    )
    versions = [
        (
            "import csv, sys\n\nseen = {}\nfor row in csv.DictReader(open(sys.argv[1])):\n    "
            "seen[row['email']] = row\n"
            "w = csv.DictWriter(open(sys.argv[2], 'w'), fieldnames=row.keys())\nw.writeheader()\n"
            "w.writerows(seen.values())\n"
            "print(len(seen))",
            'Traceback (most recent call last):\n  File "/repo/scripts/dedupe.py", line 4, in '
            "<module>\n"
            "    for row in csv.DictReader(open(sys.argv[1])):\nUnicodeDecodeError: 'utf-8' codec "
            "can't decode byte 0xe9 in position 28211: "
            "invalid continuation byte",
        ),
        (
            "import csv, sys\n\nseen = {}\nwith open(sys.argv[1], encoding='latin-1') as f:\n    "
            "for row in csv.DictReader(f):\n"
            "        seen[row['email']] = row\nwith open(sys.argv[2], 'w', newline='') as f:\n"
            "    w = csv.DictWriter(f, fieldnames=list(row))\n    w.writeheader()\n    "
            "w.writerows(seen.values())\nprint(len(seen))",
            "47102",
        ),
        (
            "import csv, sys\n\ndef key(email):\n    return email.strip().lower()\n\nseen = {}\n"
            "with open(sys.argv[1], encoding='latin-1') as f:\n    for row in csv.DictReader(f):\n"
            "        seen[key(row['email'])] = row\nwith open(sys.argv[2], 'w', newline='') as f:\n"
            "    w = csv.DictWriter(f, fieldnames=list(row))\n    w.writeheader()\n    "
            "w.writerows(seen.values())\nprint(len(seen))",
            "44987",
        ),
        (
            "import csv, sys\n\ndef key(email):\n    return email.strip().lower()\n\nseen = {}\n"
            "with open(sys.argv[1], encoding='latin-1') as f:\n    for row in csv.DictReader(f):\n"
            "        k = key(row['email'])\n"
            "        old = seen.get(k)\n        if old is None or row['updated'] > "
            "old['updated']:\n            seen[k] = {**(old or {}), **{c: v for c, v in "
            "row.items() if v}}\n"
            "with open(sys.argv[2], 'w', newline='') as f:\n    w = csv.DictWriter(f, "
            "fieldnames=list(row))\n    w.writeheader()\n"
            "    w.writerows(seen.values())\nprint(len(seen))",
            'Traceback (most recent call last):\n  File "/repo/scripts/dedupe.py", line 11, in '
            "<module>\n"
            "    if old is None or row['updated'] > old['updated']:\nKeyError: 'updated'",
        ),
        (
            "import csv, sys\n\ndef key(email):\n    return email.strip().lower()\n\nseen = {}\n"
            "with open(sys.argv[1], encoding='latin-1') as f:\n    reader = csv.DictReader(f)\n   "
            " fields = reader.fieldnames\n"
            "    for row in reader:\n        k = key(row['email'])\n        old = seen.get(k, {})\n"
            "        newer = row.get('updated', '') >= old.get('updated', '')\n"
            "        merged = {**old, **{c: v for c, v in row.items() if v}} if newer else {**{c: "
            "v for c, v in row.items() if v}, **old}\n"
            "        seen[k] = merged\nwith open(sys.argv[2], 'w', newline='') as f:\n    w = "
            "csv.DictWriter(f, fieldnames=fields)\n"
            "    w.writeheader()\n    w.writerows(seen.values())\nprint(len(seen), 'unique of', "
            "reader.line_num - 1)",
            "44987 unique of 48212",
        ),
    ]
    run = "python scripts/dedupe.py data/contacts.csv /tmp/contacts.dedup.csv"
    for n, (code, output) in enumerate(versions):
        s.sh(f"mkdir -p scripts && cat <<'EOF' > scripts/dedupe.py\n{code}\nEOF")
        s.sh(run, output)
        if n == 1:
            s.sh(
                "grep -i -c '^ana@example.com' data/contacts.csv; grep -i -c 'ana@example.com' "
                "data/contacts.csv",
                "1\n3",
            )
        if n == 2:
            s.sh(
                "python - <<'EOF'\nimport csv\nrows = "
                "list(csv.DictReader(open('/tmp/contacts.dedup.csv', encoding='latin-1')))\n"
                "print([r for r in rows if r['email'].strip().lower() == 'ana@example.com'])\nEOF",
                "[{'email': 'ANA@example.com ', 'first_name': 'Ana', 'last_name': 'Silva', "
                "'phone': '', 'updated': '2024-05-10'}]",
            )
        if n == 3:
            s.sh(
                "grep -n 'updated' data/contacts.csv | head -3; sed -n '20001,20003p' "
                "data/contacts.csv",
                "1:email,first_name,last_name,phone,updated\n"
                "email,first_name,last_name,phone,updated_at\n"
                "dee@example.net,Dee,Ng,,2024-02-02",
            )
    s.sh(
        "python - <<'EOF'\nimport csv\nrows = list(csv.DictReader(open('/tmp/contacts.dedup.csv', "
        "encoding='latin-1')))\n"
        "print([r for r in rows if r['email'].strip().lower() == 'ana@example.com'])\nprint(sum(1 "
        "for r in rows if 'updated_at' in r.values()))\nEOF",
        "[{'email': 'ana@example.com', 'first_name': 'Ana', 'last_name': 'Silva', 'phone': '+351 "
        "912 000 111', 'updated': '2024-05-10'}]\n1",
    )
    s.sh(
        "cat <<'EOF' > scripts/dedupe.py\nimport csv\nimport sys\n\nHEADER_ALIASES = "
        "{'updated_at': 'updated'}\n\n\ndef key(email):\n"
        "    return email.strip().lower()\n\n\ndef rows(path):\n    with open(path, "
        "encoding='latin-1') as f:\n        reader = csv.reader(f)\n"
        "        header = [HEADER_ALIASES.get(h, h) for h in next(reader)]\n        for values in "
        "reader:\n"
        "            if [HEADER_ALIASES.get(v, v) for v in values] == header:\n                "
        "continue  # a header repeated mid-file\n"
        "            yield dict(zip(header, values))\n\n\ndef main(src, dst):\n    seen = {}\n    "
        "total = 0\n    for row in rows(src):\n"
        "        total += 1\n        row['email'] = key(row['email'])\n        old = "
        "seen.get(row['email'], {})\n"
        "        filled = {c: v for c, v in row.items() if v}\n"
        "        seen[row['email']] = {**old, **filled} if row.get('updated', '') >= "
        "old.get('updated', '') else {**filled, **old}\n"
        "    with open(dst, 'w', newline='', encoding='utf-8') as f:\n        w = "
        "csv.DictWriter(f, fieldnames=['email', 'first_name', 'last_name', 'phone', 'updated'])\n"
        "        w.writeheader()\n        w.writerows(seen.values())\n    print(len(seen), "
        "'unique of', total)\n\n\n"
        "if __name__ == '__main__':\n    main(*sys.argv[1:3])\nEOF"
    )
    s.sh(run, "44986 unique of 48211")
    s.sh("cut -d, -f1 /tmp/contacts.dedup.csv | sort | uniq -d | head -3", "")
    s.sh(
        "grep -c '^+' <(cut -d, -f4 /tmp/contacts.dedup.csv); cut -d, -f4 /tmp/contacts.dedup.csv "
        "| sed -n '2,6p'",
        "30122\n+351 912 000 111\n+46 70 123 45 67\n\n0046701234567\n(555) 010-2288",
    )
    s.sh(
        "cat <<'EOF' > scripts/phones.py\ndef normalise(phone, default_cc='1'):\n    digits = "
        "re.sub(r'[^0-9+]', '', phone)\n"
        "    if digits.startswith('00'):\n        digits = '+' + digits[2:]\n    if digits and "
        "not digits.startswith('+'):\n"
        "        digits = '+' + default_cc + digits\n    return digits\nEOF\nsed -i 's/^import "
        "sys$/import sys\\n\\nfrom scripts.phones import normalise/' scripts/dedupe.py "
        "&& sed -i \"s/        row\\['email'\\] = key(row\\['email'\\])/        row['email'] = "
        "key(row['email'])\\n        row['phone'] = normalise(row.get('phone', ''))/\" "
        "scripts/dedupe.py"
    )
    s.sh(
        run,
        'Traceback (most recent call last):\n  File "/repo/scripts/dedupe.py", line 3, in '
        "<module>\n"
        "    from scripts.phones import normalise\nModuleNotFoundError: No module named 'scripts'",
    )
    s.sh(
        f"PYTHONPATH=. {run}",
        'Traceback (most recent call last):\n  File "/repo/scripts/phones.py", line 2, in '
        "normalise\n"
        "    digits = re.sub(r'[^0-9+]', '', phone)\nNameError: name 're' is not defined",
    )
    s.sh(
        "sed -i '1i import re\\n' scripts/phones.py && head -3 scripts/phones.py",
        "import re\n\ndef normalise(phone, default_cc='1'):",
    )
    s.sh(f"PYTHONPATH=. {run}", "44986 unique of 48211")
    s.sh(
        "cut -d, -f4 /tmp/contacts.dedup.csv | sed -n '2,6p'",
        "+351912000111\n+46701234567\n\n+46701234567\n+15550102288",
    )
    s.sh(
        "python scripts/dedupe.py data/contacts_2024.csv /tmp/contacts_2024.dedup.csv",
        "Traceback (most recent call last):\n"
        '  File "/repo/scripts/dedupe.py", line 3, in <module>\n    from scripts.phones import '
        "normalise\n"
        "ModuleNotFoundError: No module named 'scripts'",
    )
    s.sh(
        "PYTHONPATH=. python scripts/dedupe.py data/contacts_2024.csv /tmp/contacts_2024.dedup.csv",
        "11874 unique of 12006",
    )
    s.sh(
        "mkdir -p tests && cat <<'EOF' > tests/test_dedupe.py\nfrom scripts.dedupe import main\n\n"
        "\ndef test_merges_case_and_blanks(tmp_path):\n"
        "    src = tmp_path / 'in.csv'\n    "
        "src.write_text('email,first_name,last_name,phone,updated\\nA@x.io "
        ",A,B,,2024-01-02\\na@x.io,A,B,+1,2023-01-01\\n')\n"
        "    dst = tmp_path / 'out.csv'\n    main(src, dst)\n    assert "
        "dst.read_text().splitlines()[1] == 'a@x.io,A,B,+1,2024-01-02'\nEOF"
    )
    s.sh(
        "python -m pytest tests/test_dedupe.py -q",
        "F                                                                        [100%]\n"
        "E       ModuleNotFoundError: No module named 'scripts'\n1 failed in 0.05s",
    )
    s.sh(
        "touch scripts/__init__.py && python -m pytest tests/test_dedupe.py -q",
        pytest_q(1, 1, base=0.05),
    )
    s.sh(
        "cat <<'EOF' >> tests/test_dedupe.py\n\n\ndef test_skips_repeated_header(tmp_path):\n    "
        "src = tmp_path / 'in.csv'\n"
        "    src.write_text('email,first_name,last_name,phone,updated\\na@x.io,A,B,,2024-01-02\\n"
        "email,first_name,last_name,phone,updated_at\\nb@x.io,C,D,,2024-02-02\\n')\n    dst = "
        "tmp_path / 'out.csv'\n"
        "    main(src, dst)\n    assert len(dst.read_text().splitlines()) == 3\nEOF"
    )
    s.sh("python -m pytest tests/test_dedupe.py -q", pytest_q(2, 2, base=0.05))
    s.sh(
        "ruff check scripts tests && ruff format scripts tests",
        "All checks passed!\n2 files reformatted",
    )
    s.sh("python -m pytest tests/test_dedupe.py -q", pytest_q(2, 3, base=0.05))
    s.sh(
        "head -3 /tmp/contacts.dedup.csv && file /tmp/contacts.dedup.csv",
        "email,first_name,last_name,phone,updated\nana@example.com,Ana,Silva,+351 912 000 "
        "111,2024-05-10\n"
        "bo@example.org,Bo,Berg,+46 70 123 45 67,2023-11-20\n/tmp/contacts.dedup.csv: CSV text, "
        "UTF-8 Unicode text",
    )
    s.sh(
        "cp /tmp/contacts.dedup.csv data/contacts.dedup.csv && cp /tmp/contacts_2024.dedup.csv "
        "data/contacts_2024.dedup.csv && ls -la data",
        "-rw-r--r-- 1 dev dev 3121098 contacts.csv\n-rw-r--r-- 1 dev dev 2904411 "
        "contacts.dedup.csv\n"
        "-rw-r--r-- 1 dev dev  771230 contacts_2024.csv\n-rw-r--r-- 1 dev dev  760114 "
        "contacts_2024.dedup.csv",
    )
    s.sh(
        'python -c \'from scripts.phones import normalise; print(normalise("0046 70-123 45 67"), '
        'normalise("(555) 010-2288"))\'',
        "+46701234567 +15550102288",
    )
    s.sh(
        "git status --short",
        "?? data/contacts.dedup.csv\n?? data/contacts_2024.dedup.csv\n?? scripts/\n?? "
        "tests/test_dedupe.py",
    )
    s.sh("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    return s.session()


# -- 17. Claude Code builds a feature: TodoWrite, Glob, Grep, Read, Edit, MultiEdit, Write, Bash ---


def claude_code_feature() -> Session:
    s = Script(
        "claude-code-rate-limit-feature",
        "claude-code",
        "claude-opus-4-1",
        "a rate limiter added to a TypeScript API: todos, reads, edits, tsc --noEmit and vitest "
        "after each",
        shell="Bash",
    )
    root = "/Users/kim/src/notes-api"

    def bash(command: str, description: str, output: str = "", error: str | None = None) -> None:
        s.call(
            "Bash",
            {"command": command, "description": description},
            None if error else output,
            error=error,
        )

    plan = [
        "Read the middleware and config setup",
        "Add a token-bucket limiter",
        "Wire it into the routes",
        "Make limits configurable",
        "Tests for the limiter",
        "Run typecheck, lint and tests",
    ]

    def todos(done: int, extra: Sequence[str] = ()) -> None:
        items = [*plan, *extra]
        todo_write(
            s,
            [
                (p, "completed" if i < done else "in_progress" if i == done else "pending")
                for i, p in enumerate(items)
            ],
        )

    s.user(
        "Add per-API-key rate limiting to the notes API: 100 requests/minute by default, "
        "configurable, "
        "429 with Retry-After when exceeded."
    )
    todos(0)
    s.call(
        "Glob",
        {"pattern": "src/**/*.ts"},
        "\n".join(
            f"{root}/src/{f}"
            for f in (
                "app.ts",
                "config.ts",
                "server.ts",
                "middleware/auth.ts",
                "middleware/errors.ts",
                "middleware/logging.ts",
                "routes/notes.ts",
                "routes/health.ts",
                "store/notes.ts",
                "types.ts",
            )
        ),
    )
    s.call(
        "Read",
        {"file_path": f"{root}/src/app.ts"},
        arrowed(
            [
                "import express from 'express';",
                "import { auth } from './middleware/auth';",
                "import { errors } from './middleware/errors';",
                "import { notes } from './routes/notes';",
                "",
                "export function createApp(config: Config) {",
                "  const app = express();",
                "  app.use(express.json());",
                "  app.use('/v1', auth(config), notes());",
                "  app.use(errors);",
                "  return app;",
                "}",
            ]
        ),
    )
    s.call(
        "Read",
        {"file_path": f"{root}/src/middleware/auth.ts"},
        arrowed(
            [
                "export function auth(config: Config): RequestHandler {",
                "  return (req, res, next) => {",
                "    const key = req.header('x-api-key');",
                "    if (!key || !config.apiKeys.includes(key)) return res.status(401).end();",
                "    res.locals.apiKey = key;",
                "    next();",
                "  };",
                "}",
            ]
        ),
        batched=True,
    )
    s.call(
        "Read",
        {"file_path": f"{root}/src/config.ts"},
        arrowed(
            [
                "export interface Config {",
                "  port: number;",
                "  apiKeys: string[];",
                "}",
                "",
                "export function loadConfig(env = process.env): Config {",
                "  return {",
                "    port: Number(env.PORT ?? 3000),",
                "    apiKeys: (env.API_KEYS ?? '').split(',').filter(Boolean),",
                "  };",
                "}",
            ]
        ),
        batched=True,
    )
    s.call(
        "Grep",
        {"pattern": "vitest|supertest", "path": f"{root}/package.json", "output_mode": "content"},
        '    "supertest": "^7.0.0",\n    "vitest": "^2.1.4"',
    )
    bash("npx tsc --noEmit", "Typecheck before changes")
    bash(
        "npx vitest run --reporter=dot 2>&1 | tail -4",
        "Run the tests first",
        " Test Files  6 passed (6)\n      Tests  41 passed (41)\n   Start at  10:02:11\n   "
        "Duration  2.18s",
    )
    todos(1)
    s.call(
        "Write",
        {
            "file_path": f"{root}/src/middleware/rateLimit.ts",
            "content": "import type { RequestHandler } from 'express';\n\nexport interface Bucket "
            "{ tokens: number; updated: number }\n\n"
            "export function rateLimit(perMinute: number, now = () => Date.now()): RequestHandler "
            "{\n"
            "  const buckets = new Map<string, Bucket>();\n  return (req, res, next) => {\n"
            "    const key = res.locals.apiKey as string;\n    const t = now();\n"
            "    const b = buckets.get(key) ?? { tokens: perMinute, updated: t };\n"
            "    b.tokens = Math.min(perMinute, b.tokens + ((t - b.updated) / 60000) * "
            "perMinute);\n    b.updated = t;\n"
            "    if (b.tokens < 1) {\n      res.set('Retry-After', String(Math.ceil(((1 - "
            "b.tokens) * 60) / perMinute)));\n"
            "      return res.status(429).json({ error: 'rate limit exceeded' });\n    }\n    "
            "b.tokens -= 1;\n"
            "    buckets.set(key, b);\n    next();\n  };\n}\n",
        },
        f"File created successfully at: {root}/src/middleware/rateLimit.ts",
    )
    bash("npx tsc --noEmit", "Typecheck")
    todos(2)
    s.call(
        "Edit",
        {
            "file_path": f"{root}/src/app.ts",
            "old_string": "  app.use('/v1', auth(config), notes());",
            "new_string": "  app.use('/v1', auth(config), rateLimit(config.rateLimitPerMinute), "
            "notes());",
        },
        edited(
            f"{root}/src/app.ts",
            ["  app.use('/v1', auth(config), rateLimit(config.rateLimitPerMinute), notes());"],
            9,
        ),
    )
    bash(
        "npx tsc --noEmit",
        "Typecheck",
        error="src/app.ts(9,30): error TS2304: Cannot find name 'rateLimit'.\n"
        "src/app.ts(9,47): error TS2339: Property 'rateLimitPerMinute' does not exist on type "
        "'Config'.",
    )
    s.call(
        "Edit",
        {
            "file_path": f"{root}/src/app.ts",
            "old_string": "import { notes } from './routes/notes';",
            "new_string": "import { rateLimit } from './middleware/rateLimit';\nimport { notes } "
            "from './routes/notes';",
        },
        edited(
            f"{root}/src/app.ts",
            [
                "import { rateLimit } from './middleware/rateLimit';",
                "import { notes } from './routes/notes';",
            ],
            4,
        ),
    )
    todos(3)
    s.call(
        "MultiEdit",
        {
            "file_path": f"{root}/src/config.ts",
            "edits": [
                {
                    "old_string": "  apiKeys: string[];\n}",
                    "new_string": "  apiKeys: string[];\n  rateLimitPerMinute: number;\n}",
                },
                {
                    "old_string": "    apiKeys: (env.API_KEYS ?? '').split(',').filter(Boolean),\n",
                    "new_string": "    apiKeys: (env.API_KEYS ?? '').split(',').filter(Boolean),\n"
                    "    rateLimitPerMinute: Number(env.RATE_LIMIT_PER_MINUTE ?? 100),\n",
                },
            ],
        },
        f'Applied 2 edits to {root}/src/config.ts:\n1. Replaced "  apiKeys: string[];\\n}}" with '
        f'"  apiKeys: string[];\\n  '
        'rateLimitPerMinute: number;\\n}"\n2. Replaced "    apiKeys: (env.API_KEYS ?? '
        "'').split(',').filter(Boolean),\\n\" with "
        "\"    apiKeys: (env.API_KEYS ?? '').split(',').filter(Boolean),\\n    "
        'rateLimitPerMinute:..."',
    )
    bash(
        "npx tsc --noEmit",
        "Typecheck",
        error="test/helpers.ts(12,24): error TS2741: Property 'rateLimitPerMinute' is missing in "
        "type '{ port: number; apiKeys: string[]; }' but required in type 'Config'.",
    )
    s.call(
        "Read",
        {"file_path": f"{root}/test/helpers.ts"},
        arrowed(
            [
                "import { createApp } from '../src/app';",
                "",
                "export function testApp(overrides: Partial<Config> = {}) {",
                "  return createApp({",
                "    port: 0,",
                "    apiKeys: ['test-key'],",
                "    ...overrides,",
                "  });",
                "}",
            ],
            9,
        ),
    )
    s.call(
        "Edit",
        {
            "file_path": f"{root}/test/helpers.ts",
            "old_string": "    apiKeys: ['test-key'],\n",
            "new_string": "    apiKeys: ['test-key'],\n    rateLimitPerMinute: 1000,\n",
        },
        edited(
            f"{root}/test/helpers.ts",
            ["    apiKeys: ['test-key'],", "    rateLimitPerMinute: 1000,"],
            14,
        ),
    )
    bash("npx tsc --noEmit", "Typecheck")
    bash(
        "npx vitest run --reporter=dot 2>&1 | tail -4",
        "Run the tests",
        " Test Files  6 passed (6)\n      Tests  41 passed (41)\n   Start at  10:09:47\n   "
        "Duration  2.24s",
    )
    todos(4)
    s.call(
        "Write",
        {
            "file_path": f"{root}/test/rateLimit.test.ts",
            "content": "import request from 'supertest';\nimport { describe, expect, it } from "
            "'vitest';\nimport { testApp } from './helpers';\n\n"
            "describe('rate limit', () => {\n  it('answers 429 with Retry-After past the limit', "
            "async () => {\n"
            "    const app = testApp({ rateLimitPerMinute: 2 });\n    const get = () => "
            "request(app).get('/v1/notes').set('x-api-key', 'test-key');\n"
            "    expect((await get()).status).toBe(200);\n    expect((await "
            "get()).status).toBe(200);\n    const third = await get();\n"
            "    expect(third.status).toBe(429);\n    "
            "expect(third.headers['retry-after']).toBe('30');\n  });\n});\n",
        },
        f"File created successfully at: {root}/test/rateLimit.test.ts",
    )
    bash(
        "npx vitest run test/rateLimit.test.ts 2>&1 | tail -8",
        "Run the new test",
        error=" FAIL  test/rateLimit.test.ts > rate limit > answers 429 with Retry-After past the "
        "limit\n"
        "AssertionError: expected '31' to be '30' // Object.is equality\n - Expected: \"30\"\n + "
        'Received: "31"\n'
        " Test Files  1 failed (1)\n      Tests  1 failed (1)",
    )
    s.call(
        "Read",
        {"file_path": f"{root}/src/middleware/rateLimit.ts", "offset": 10, "limit": 10},
        arrowed(
            [
                "    b.tokens = Math.min(perMinute, b.tokens + ((t - b.updated) / 60000) * "
                "perMinute);",
                "    b.updated = t;",
                "    if (b.tokens < 1) {",
                "      res.set('Retry-After', String(Math.ceil(((1 - b.tokens) * 60) / "
                "perMinute)));",
            ],
            10,
        ),
    )
    s.call(
        "Edit",
        {
            "file_path": f"{root}/test/rateLimit.test.ts",
            "old_string": "    const app = testApp({ rateLimitPerMinute: 2 });",
            "new_string": "    let t = 0;\n    const app = testApp({ rateLimitPerMinute: 2, now: "
            "() => t });",
        },
        edited(
            f"{root}/test/rateLimit.test.ts",
            ["    let t = 0;", "    const app = testApp({ rateLimitPerMinute: 2, now: () => t });"],
            7,
        ),
    )
    s.call(
        "MultiEdit",
        {
            "file_path": f"{root}/src/app.ts",
            "edits": [
                {
                    "old_string": "export function createApp(config: Config) {",
                    "new_string": "export function createApp(config: Config & { now?: () => "
                    "number }) {",
                },
                {
                    "old_string": "rateLimit(config.rateLimitPerMinute)",
                    "new_string": "rateLimit(config.rateLimitPerMinute, config.now)",
                },
            ],
        },
        f'Applied 2 edits to {root}/src/app.ts:\n1. Replaced "export function createApp(config: '
        f'Config) {{" with "export function '
        'createApp(config: Config & { now?: () => number }) {"\n2. Replaced '
        '"rateLimit(config.rateLimitPerMinute)" with '
        '"rateLimit(config.rateLimitPerMinute, config.now)"',
    )
    bash("npx tsc --noEmit", "Typecheck")
    bash(
        "npx vitest run test/rateLimit.test.ts 2>&1 | tail -4",
        "Run the new test",
        " Test Files  1 passed (1)\n      Tests  1 passed (1)\n   Start at  10:14:02\n   Duration "
        " 412ms",
    )
    s.call(
        "Edit",
        {
            "file_path": f"{root}/test/rateLimit.test.ts",
            "old_string": "  });\n});\n",
            "new_string": "  });\n\n  it('refills over time and keeps keys apart', async () => {\n"
            "    let t = 0;\n"
            "    const app = testApp({ rateLimitPerMinute: 1, apiKeys: ['a', 'b'], now: () => t "
            "});\n"
            "    const get = (k: string) => request(app).get('/v1/notes').set('x-api-key', k);\n"
            "    expect((await get('a')).status).toBe(200);\n    expect((await "
            "get('b')).status).toBe(200);\n"
            "    expect((await get('a')).status).toBe(429);\n    t += 60_000;\n    expect((await "
            "get('a')).status).toBe(200);\n  });\n});\n",
        },
        edited(
            f"{root}/test/rateLimit.test.ts",
            ["  it('refills over time and keeps keys apart', async () => {"],
            17,
        ),
    )
    bash("npx tsc --noEmit", "Typecheck")
    bash(
        "npx vitest run --reporter=dot 2>&1 | tail -4",
        "Run all tests",
        " Test Files  7 passed (7)\n      Tests  43 passed (43)\n   Start at  10:15:30\n   "
        "Duration  2.31s",
    )
    todos(5, ["Document RATE_LIMIT_PER_MINUTE"])
    bash("npx eslint src test", "Lint")
    s.call(
        "Grep",
        {"pattern": "API_KEYS", "path": root, "glob": "*.md", "output_mode": "content", "-n": True},
        f"{root}/README.md:31:| `API_KEYS` | comma-separated keys allowed to call the API | "
        f"(none) |",
    )
    s.call(
        "Edit",
        {
            "file_path": f"{root}/README.md",
            "old_string": "| `API_KEYS` | comma-separated keys allowed to call the API | (none) |",
            "new_string": "| `API_KEYS` | comma-separated keys allowed to call the API | (none) |\n"
            "| `RATE_LIMIT_PER_MINUTE` | requests per minute per API key; past it, 429 with "
            "`Retry-After` | 100 |",
        },
        edited(
            f"{root}/README.md",
            [
                "| `RATE_LIMIT_PER_MINUTE` | requests per minute per API key; past it, 429 with "
                "`Retry-After` | 100 |"
            ],
            32,
        ),
    )
    bash(
        "npx tsc --noEmit && npx eslint src test && npx vitest run --reporter=dot 2>&1 | tail -3",
        "Typecheck, lint and test",
        "      Tests  43 passed (43)\n   Start at  10:17:12\n   Duration  2.27s",
    )
    bash(
        "git status --short",
        "Show changed files",
        " M README.md\n M src/app.ts\n M src/config.ts\n M test/helpers.ts\n"
        "?? src/middleware/rateLimit.ts\n?? test/rateLimit.test.ts",
    )
    todo_write(s, [(p, "completed") for p in [*plan, "Document RATE_LIMIT_PER_MINUTE"]])
    s.reply(
        "Added per-key rate limiting (token bucket, `src/middleware/rateLimit.ts`): 100 "
        "requests/minute by default, "
        "`RATE_LIMIT_PER_MINUTE` to change it, and 429 with `Retry-After` when exceeded. Two new "
        "tests cover the limit, "
        "refill and per-key isolation; typecheck, lint and all 43 tests pass. Note: buckets are "
        "in memory, per process."
    )
    return s.session()


# -- 18. Codex CLI: apply_patch and cargo test through its shell tool ------------------------------


def codex_apply_patch_cargo() -> Session:
    s = Script(
        "codex-apply-patch-cargo",
        "codex-cli",
        "gpt-5-codex",
        "a Rust parser fixed with apply_patch, cargo test after each patch, update_plan between",
    )
    wd = "/home/u/tomlette"

    def sh(command: str, output: str, code: int = 0, seconds: float = 0.4) -> None:
        s.call(
            "shell",
            {"command": ["bash", "-lc", command], "workdir": wd, "timeout_ms": 120000},
            {"output": output, "metadata": {"exit_code": code, "duration_seconds": seconds}},
        )

    def patch(body: str, files: str) -> None:
        s.call(
            "apply_patch",
            {"input": f"*** Begin Patch\n{body}\n*** End Patch"},
            f"Success. Updated the following files:\n{files}",
        )

    def plan(steps: Sequence[tuple[str, str]], note: str) -> None:
        s.call(
            "update_plan",
            {"explanation": note, "plan": [{"step": a, "status": b} for a, b in steps]},
            "Plan updated",
        )

    def cargo_ok(passed: int, seconds: float) -> str:
        return (
            f"running {passed} tests\n" + "".join(f"test t{i} ... ok\n" for i in range(3)) + "...\n"
            f"test result: ok. {passed} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
            f"finished in {seconds:.2f}s"
        )

    steps = [
        "Reproduce the escaped-quote bug",
        "Fix basic-string escapes",
        "Support multi-line strings",
        "Add tests",
        "Run clippy",
    ]
    s.user(
        'Strings with escaped quotes break the parser (`a = "say \\"hi\\""`). Fix it, and '
        "multi-line basic strings too."
    )
    plan([(steps[0], "in_progress"), *((x, "pending") for x in steps[1:])], "Start by reproducing.")
    sh(
        "ls && sed -n '1,12p' Cargo.toml",
        'Cargo.lock\nCargo.toml\nREADME.md\nexamples\nsrc\ntests\n[package]\nname = "tomlette"\n'
        'version = "0.3.1"\nedition = "2021"\n\n[dependencies]\n\n[dev-dependencies]\n'
        'pretty_assertions = "1"',
        seconds=0.1,
    )
    sh(
        "git status --short && ls src",
        "error.rs\nlexer.rs\nlib.rs\nparser.rs\nvalue.rs",
        seconds=0.1,
    )
    sh(
        "rg -n 'fn parse_basic_string|fn parse_string' src",
        "src/lexer.rs:88:    fn parse_basic_string(&mut self) -> Result<Token, Error> {",
    )
    sh(
        "sed -n '80,140p' src/lexer.rs",
        "    fn parse_basic_string(&mut self) -> Result<Token, Error> {\n        self.bump(); // "
        "opening quote\n"
        "        let start = self.pos;\n        while let Some(c) = self.peek() {\n            if "
        "c == '\"' { break; }\n            self.bump();\n"
        "        }\n        let text = &self.src[start..self.pos];\n        self.bump();\n        "
        "Ok(Token::Str(text.to_string()))\n    }",
    )
    sh(
        "cargo test 2>&1 | tail -3",
        "test result: ok. 41 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in "
        "0.52s",
        seconds=14.2,
    )
    sh(
        'printf \'a = "say \\\\"hi\\\\""\\n\' > /tmp/q.toml && cargo run -q --example dump '
        "/tmp/q.toml",
        "Error: unexpected character '\\\\' at line 1, column 12",
        code=1,
        seconds=2.1,
    )
    plan(
        [(steps[0], "completed"), (steps[1], "in_progress"), *((x, "pending") for x in steps[2:])],
        "Reproduced: the lexer stops at the escaped quote.",
    )
    patch(
        "*** Update File: src/lexer.rs\n@@ fn parse_basic_string\n-        let start = self.pos;\n"
        "-        while let Some(c) = self.peek() {\n"
        "-            if c == '\"' { break; }\n-            self.bump();\n-        }\n-        "
        "let text = &self.src[start..self.pos];\n"
        "+        let mut text = String::new();\n+        while let Some(c) = self.bump() {\n+    "
        "        match c {\n"
        "+                '\"' => return Ok(Token::Str(text)),\n+                '\\\\' => "
        "text.push(self.escape()?),\n"
        "+                c => text.push(c),\n+            }\n+        }\n+        "
        "Err(Error::UnterminatedString(self.line))",
        "M src/lexer.rs",
    )
    sh(
        "cargo build 2>&1 | tail -5",
        "error[E0599]: no method named `escape` found for mutable reference `&mut Lexer<'a>` in "
        "the current scope\n"
        "  --> src/lexer.rs:93:46\nerror: could not compile `tomlette` (lib) due to 1 previous "
        "error",
        code=101,
        seconds=3.3,
    )
    patch(
        "*** Update File: src/lexer.rs\n@@ impl<'a> Lexer<'a>\n+    fn escape(&mut self) -> "
        "Result<char, Error> {\n"
        "+        match self.bump() {\n+            Some('n') => Ok('\\n'),\n+            "
        "Some('t') => Ok('\\t'),\n"
        "+            Some('\"') => Ok('\"'),\n+            Some('\\\\') => Ok('\\\\'),\n+        "
        "    Some('u') => self.unicode(4),\n"
        "+            Some('U') => self.unicode(8),\n+            other => "
        "Err(Error::BadEscape(self.line, other)),\n+        }\n+    }",
        "M src/lexer.rs",
    )
    sh(
        "cargo build 2>&1 | tail -5",
        "error[E0599]: no method named `unicode` found for mutable reference `&mut Lexer<'a>` in "
        "the current scope\n"
        "error[E0599]: no variant named `BadEscape` found for enum `Error`",
        code=101,
        seconds=3.1,
    )
    patch(
        "*** Update File: src/lexer.rs\n@@ impl<'a> Lexer<'a>\n+    fn unicode(&mut self, digits: "
        "usize) -> Result<char, Error> {\n"
        "+        let hex: String = (0..digits).filter_map(|_| self.bump()).collect();\n"
        "+        u32::from_str_radix(&hex, "
        "16).ok().and_then(char::from_u32).ok_or(Error::BadUnicode(self.line))\n+    }\n"
        "*** Update File: src/error.rs\n@@ pub enum Error {\n+    BadEscape(usize, Option<char>),\n"
        "+    BadUnicode(usize),",
        "M src/lexer.rs\nM src/error.rs",
    )
    sh(
        "cargo build 2>&1 | tail -3",
        "error[E0004]: non-exhaustive patterns: `&Error::BadEscape(_, _)` and "
        "`&Error::BadUnicode(_)` not covered\n"
        "  --> src/error.rs:21:15",
        code=101,
        seconds=2.9,
    )
    patch(
        "*** Update File: src/error.rs\n@@ impl fmt::Display for Error\n+            "
        'Error::BadEscape(line, c) => write!(f, "invalid escape {c:?} at line {line}"),\n'
        '+            Error::BadUnicode(line) => write!(f, "invalid unicode escape at line '
        '{line}"),',
        "M src/error.rs",
    )
    sh(
        "cargo build 2>&1 | tail -1",
        "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 2.71s",
        seconds=2.8,
    )
    sh("cargo run -q --example dump /tmp/q.toml", '{"a": "say \\"hi\\""}', seconds=1.2)
    sh("cargo test 2>&1 | tail -3", cargo_ok(41, 0.51), seconds=11.8)
    plan(
        [
            *((x, "completed") for x in steps[:2]),
            (steps[2], "in_progress"),
            *((x, "pending") for x in steps[3:]),
        ],
        "Escapes work; now multi-line basic strings.",
    )
    sh(
        'rg -n \'"""\' src tests | head',
        'tests/fixtures/multiline.toml:1:desc = """\ntests/spec.rs:212:#[ignore = "multi-line '
        'strings"]',
    )
    sh(
        "sed -n '205,240p' tests/spec.rs",
        '#[test]\n#[ignore = "multi-line strings"]\nfn multiline_basic() {\n'
        '    let v = parse(include_str!("fixtures/multiline.toml")).unwrap();\n    '
        'assert_eq!(v["desc"], "line one\\nline two\\n");\n}',
    )
    patch(
        "*** Update File: src/lexer.rs\n@@ fn parse_basic_string\n-        self.bump(); // "
        "opening quote\n"
        "+        self.bump(); // opening quote\n+        if "
        'self.src[self.pos..].starts_with("\\"\\"") {\n'
        "+            self.pos += 2;\n+            return self.parse_multiline_basic();\n+        "
        "}",
        "M src/lexer.rs",
    )
    patch(
        "*** Update File: src/lexer.rs\n@@ impl<'a> Lexer<'a>\n+    fn parse_multiline_basic(&mut "
        "self) -> Result<Token, Error> {\n"
        "+        if self.peek() == Some('\\n') { self.bump(); }\n+        let mut text = "
        "String::new();\n"
        "+        while let Some(c) = self.bump() {\n+            match c {\n"
        '+                \'"\' if self.src[self.pos..].starts_with("\\"\\"") => { self.pos += 2; '
        "return Ok(Token::Str(text)); }\n"
        "+                '\\\\' => text.push(self.escape()?),\n+                c => "
        "text.push(c),\n+            }\n+        }\n"
        "+        Err(Error::UnterminatedString(self.line))\n+    }\n*** Update File: "
        'tests/spec.rs\n@@\n-#[ignore = "multi-line strings"]',
        "M src/lexer.rs\nM tests/spec.rs",
    )
    sh(
        "cargo test multiline 2>&1 | tail -4",
        "running 1 test\ntest multiline_basic ... FAILED\n\n"
        "thread 'multiline_basic' panicked at tests/spec.rs:210:5:\nassertion `left == right` "
        'failed\n  left: "line one\\r\\nline two\\r\\n"\n'
        ' right: "line one\\nline two\\n"',
        code=101,
        seconds=4.4,
    )
    sh(
        "file tests/fixtures/multiline.toml",
        "tests/fixtures/multiline.toml: ASCII text, with CRLF line terminators",
    )
    sh(
        "git log --oneline -1 -- tests/fixtures/multiline.toml && git config core.autocrlf",
        "8e1aa02 add fixtures from toml-test\ntrue",
        seconds=0.1,
    )
    patch(
        "*** Update File: src/lexer.rs\n@@ fn parse_multiline_basic\n-        if self.peek() == "
        "Some('\\n') { self.bump(); }\n"
        '+        if self.src[self.pos..].starts_with("\\r\\n") { self.pos += 2; } else if '
        "self.peek() == Some('\\n') { self.bump(); }\n"
        "@@\n-                c => text.push(c),\n+                '\\r' if self.peek() == "
        "Some('\\n') => {}\n+                c => text.push(c),",
        "M src/lexer.rs",
    )
    sh(
        "cargo test multiline 2>&1 | tail -2",
        "test multiline_basic ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 "
        "measured; 44 filtered out; finished in 0.00s",
        seconds=4.0,
    )
    sh("cargo test 2>&1 | tail -3", cargo_ok(42, 0.55), seconds=12.1)
    plan(
        [*((x, "completed") for x in steps[:3]), (steps[3], "in_progress"), (steps[4], "pending")],
        "Multi-line strings pass; add tests.",
    )
    patch(
        "*** Update File: tests/spec.rs\n@@\n+#[test]\n+fn escaped_quotes() {\n+    let v = "
        'parse(r#"a = "say \\"hi\\"""#).unwrap();\n'
        '+    assert_eq!(v["a"], "say \\"hi\\"");\n+}\n+\n+#[test]\n+fn bad_escape_is_an_error() '
        "{\n"
        '+    assert!(matches!(parse(r#"a = "\\q""#), Err(Error::BadEscape(1, Some(\'q\')))));\n'
        "+}\n+\n+#[test]\n"
        '+fn unicode_escapes() {\n+    assert_eq!(parse(r#"a = '
        '"\\u00e9\\U0001F600""#).unwrap()["a"], "é😀");\n+}',
        "M tests/spec.rs",
    )
    sh("cargo test 2>&1 | tail -3", cargo_ok(45, 0.57), seconds=12.4)
    plan([*((x, "completed") for x in steps[:4]), (steps[4], "in_progress")], "Tests added; lint.")
    sh(
        "cargo clippy --all-targets -- -D warnings 2>&1 | tail -6",
        "error: this `if` has identical blocks\n   --> src/lexer.rs:131:9\n"
        "error: could not compile `tomlette` (lib) due to 1 previous error",
        code=101,
        seconds=6.0,
    )
    patch(
        "*** Update File: src/lexer.rs\n@@ fn parse_multiline_basic\n-        if "
        'self.src[self.pos..].starts_with("\\r\\n") { self.pos += 2; } else if self.peek() == '
        "Some('\\n') { self.bump(); }\n"
        '+        let newline = if self.src[self.pos..].starts_with("\\r\\n") { 2 } else { '
        "usize::from(self.peek() == Some('\\n')) };\n"
        "+        self.pos += newline;",
        "M src/lexer.rs",
    )
    sh(
        "cargo clippy --all-targets -- -D warnings 2>&1 | tail -1",
        "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 3.88s",
        seconds=3.9,
    )
    sh("cargo test 2>&1 | tail -3", cargo_ok(45, 0.54), seconds=11.9)
    sh(
        "cargo fmt --check && git diff --stat",
        " src/error.rs  |  4 +++\n src/lexer.rs  | 58 +++++++++++++++++++++-------\n"
        " tests/spec.rs | 19 +++++++++-\n 3 files changed, 69 insertions(+), 12 deletions(-)",
        seconds=0.3,
    )
    plan([(x, "completed") for x in steps], "Done.")
    s.reply(
        'Fixed: basic strings now handle escapes (\\", \\\\, \\n, \\t, \\uXXXX, \\UXXXXXXXX, with '
        "an error for "
        "invalid ones), and multi-line basic strings are supported, CRLF included (the fixture "
        "has CRLF endings). "
        "The ignored multiline spec test is enabled and three tests were added; cargo test (45), "
        "clippy and fmt are clean."
    )
    return s.session()


# -- 19. web research: searches and fetches, one blocked page, notes written -----------------------


def web_research_report() -> Session:
    s = Script(
        "web-research-report",
        "deep-research",
        "o4-mini",
        "a comparison of three vector databases researched by web_search and fetch_url, notes kept",
    )
    s.user(
        "Compare pgvector, Qdrant and Milvus for 50M 768-d embeddings with filtering. Cite sources."
    )
    searches = [
        (
            "pgvector HNSW 50 million vectors performance",
            [
                "github.com/pgvector/pgvector",
                "supabase.com/blog/pgvector-performance",
                "jkatz05.com/post/postgres/pgvector-performance-150x-speedup",
            ],
        ),
        (
            "pgvector filtered search iterative index scan",
            [
                "github.com/pgvector/pgvector#iterative-index-scans",
                "neon.tech/blog/pgvector-filtering",
            ],
        ),
        (
            "Qdrant payload filtering HNSW benchmark",
            ["qdrant.tech/benchmarks", "qdrant.tech/articles/filtrable-hnsw"],
        ),
        (
            "Qdrant quantization memory 768 dimensions",
            [
                "qdrant.tech/documentation/guides/quantization",
                "qdrant.tech/articles/scalar-quantization",
            ],
        ),
        (
            "Milvus 2.4 filtering performance partition key",
            ["milvus.io/docs/use-partition-key.md", "zilliz.com/blog/milvus-filtering"],
        ),
        (
            "Milvus DiskANN memory 50M vectors",
            ["milvus.io/docs/disk_index.md", "zilliz.com/learn/diskann"],
        ),
        (
            "ann-benchmarks filtered vector search 2024",
            ["big-ann-benchmarks.com/neurips23.html", "arxiv.org/abs/2403.xxxxx"],
        ),
        (
            "pgvector halfvec binary quantization 0.7",
            [
                "github.com/pgvector/pgvector/blob/master/CHANGELOG.md",
                "jkatz05.com/post/postgres/pgvector-scalar-binary-quantization",
            ],
        ),
        (
            "self-hosted Qdrant vs Milvus cost 50M vectors",
            ["qdrant.tech/pricing", "zilliz.com/pricing"],
        ),
        (
            "pgvector vs qdrant vs milvus operational experience",
            ["news.ycombinator.com/item?id=39531217", "reddit.com/r/LocalLLaMA/comments/1b2x9"],
        ),
    ]
    fetched: list[str] = []
    for n, (query, urls) in enumerate(searches):
        s.call(
            "web_search",
            {"query": query, "num_results": 5},
            [
                {
                    "title": f"{u.split('/')[0]}: result {i + 1}",
                    "url": f"https://{u}",
                    "snippet": f"{query.split()[0]} ... {i * 17 + n}",
                }
                for i, u in enumerate(urls)
            ],
        )
        for k, url in enumerate(urls[:2]):
            if url.startswith("reddit.com"):
                s.call(
                    "fetch_url",
                    {"url": f"https://{url}", "max_chars": 20000},
                    None,
                    error="HTTP 403: Forbidden",
                )
                continue
            s.call(
                "fetch_url",
                {"url": f"https://{url}", "max_chars": 20000},
                f"# {url}\n\n"
                + f"Section {n}.{k}: measured recall@10 and QPS; " * (3 + k)
                + f"({len(fetched) + 1})",
            )
            fetched.append(url)
        if n % 3 == 2:
            s.call(
                "write_note",
                {
                    "file": "notes.md",
                    "append": f"## After search {n + 1}\n- sources so far: {len(fetched)}\n",
                },
                {"ok": True, "bytes_written": 40 + n},
            )
    s.call(
        "fetch_url",
        {"url": "https://old.reddit.com/r/LocalLLaMA/comments/1b2x9", "max_chars": 20000},
        "# old.reddit.com thread\n\nWe run 80M vectors in Qdrant on 3 nodes with scalar "
        "quantization; filters on tenant_id ...",
    )
    s.call(
        "fetch_url",
        {"url": "https://github.com/pgvector/pgvector#filtering", "max_chars": 20000},
        "# pgvector: Filtering\n\nWith approximate indexes, filtering is applied after the index "
        "is scanned ... "
        "use iterative index scans (0.8.0+) or partial indexes.",
    )
    s.call(
        "read_note",
        {"file": "notes.md"},
        "## After search 3\n- sources so far: 6\n## After search 6\n- sources so far: 12\n",
    )
    s.call("calculate", {"expression": "50e6 * 768 * 4 / 2**30"}, "143.05")
    s.call("calculate", {"expression": "50e6 * 768 * 1 / 2**30"}, "35.76")
    s.call(
        "write_note",
        {
            "file": "report.md",
            "append": "# pgvector vs Qdrant vs Milvus at 50M x 768\n\nRaw vectors: 143 GiB "
            "float32, "
            "36 GiB int8 ...",
        },
        {"ok": True, "bytes_written": 2210},
    )
    s.reply(
        "Summary (50M x 768-d, filtered search; raw vectors 143 GiB float32, 36 GiB with int8 "
        "quantization):\n"
        "- pgvector (0.7+): simplest if you already run Postgres; HNSW with iterative index scans "
        "fixes most filtered-recall "
        "problems, but index builds at this size take hours and need RAM for the graph [pgvector "
        "README, jkatz05].\n"
        "- Qdrant: filter-aware HNSW keeps recall under selective filters; scalar quantization "
        "cuts memory 4x [qdrant.tech "
        "benchmarks, filtrable-hnsw]; operators report 80M on 3 nodes [reddit].\n"
        "- Milvus: most scalable (DiskANN, partition keys for tenant filters) but the most moving "
        "parts [milvus docs, zilliz].\n"
        "Full notes with links are in report.md."
    )
    return s.session()


# -- 20. a Kubernetes rollout watched to the end ---------------------------------------------------


def k8s_rollout_watch() -> Session:
    s = Script(
        "k8s-rollout-watch",
        "sre-agent",
        "gpt-4.1",
        "a config fix rolled out on Kubernetes: rollout status polled as replicas come up, logs "
        "checked",
    )
    s.user("The api pods in prod crashloop after this morning's deploy. Find out why and fix it.")
    ns = "-n prod"
    s.sh(
        f"kubectl get pods {ns} -l app=api",
        "NAME                   READY   STATUS             RESTARTS      AGE\n"
        "api-6c9d7f9b8-2kq4n   0/1     CrashLoopBackOff   7 (2m ago)    14m\napi-6c9d7f9b8-8wz7x  "
        " 0/1     CrashLoopBackOff   7 (1m ago)    14m\n"
        "api-7b5c4d6f5-lm2p9   1/1     Running            0             2d",
    )
    s.sh(
        f"kubectl describe pod {ns} api-6c9d7f9b8-2kq4n | tail -6",
        "Events:\n  Type     Reason   Age                From     Message\n"
        "  Normal   Pulled   12m (x7 over 14m)  kubelet  Container image "
        '"ghcr.io/acme/api:v2.31.0" already present\n'
        "  Warning  BackOff  2m (x52 over 14m)  kubelet  Back-off restarting failed container api",
    )
    s.sh(
        f"kubectl rollout history deployment/api {ns} | tail -3",
        "12        <none>\n13        <none>\n14        kubectl rollout restart",
    )
    s.sh(
        f"kubectl logs {ns} api-6c9d7f9b8-2kq4n --previous | tail -5",
        "2025-03-14T09:41:02Z INFO starting api v2.31.0\n"
        '2025-03-14T09:41:02Z ERROR config: DATABASE_POOL_SIZE: invalid integer "20 "\npanic: '
        "invalid configuration",
    )
    s.sh(
        f"kubectl get configmap api-config {ns} -o yaml | grep -n POOL",
        '9:  DATABASE_POOL_SIZE: "20 "',
    )
    s.sh(
        "git -C deploy log --oneline -3 -- k8s/prod/api-config.yaml",
        "4f1a2b9 prod: raise the pool size\n1d0e3c8 prod: new cache TTL\n9a8b7c6 prod: initial",
    )
    s.sh(
        "git -C deploy show 4f1a2b9 -- k8s/prod/api-config.yaml | tail -4",
        '-  DATABASE_POOL_SIZE: "10"\n+  DATABASE_POOL_SIZE: "20 "',
    )
    s.sh(
        'sed -i \'s/DATABASE_POOL_SIZE: "20 "/DATABASE_POOL_SIZE: "20"/\' '
        "deploy/k8s/prod/api-config.yaml && git -C deploy diff --stat",
        " k8s/prod/api-config.yaml | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
    )
    s.sh(
        "kubectl apply --dry-run=server -f deploy/k8s/prod/api-config.yaml",
        "configmap/api-config configured (server dry run)",
    )
    s.sh("kubectl apply -f deploy/k8s/prod/api-config.yaml", "configmap/api-config configured")
    s.sh(
        f"kubectl get configmap api-config {ns} -o jsonpath='{{.data.DATABASE_POOL_SIZE}}' | od "
        f"-c | head -2",
        "0000000   2   0\n0000002",
    )
    s.sh(
        f"kubectl get hpa api {ns}",
        "NAME   REFERENCE        TARGETS   MINPODS   MAXPODS   REPLICAS   AGE\napi    "
        "Deployment/api   31%/70%   3         12        3          212d",
    )
    s.sh(f"kubectl rollout restart deployment/api {ns}", "deployment.apps/api restarted")
    watch = f"kubectl rollout status deployment/api {ns} --timeout=20s"
    progress = [
        (
            'Waiting for deployment "api" rollout to finish: 0 of 3 updated replicas are '
            "available...",
            1,
        ),
        (
            'Waiting for deployment "api" rollout to finish: 0 of 3 updated replicas are '
            "available...",
            1,
        ),
        (
            'Waiting for deployment "api" rollout to finish: 1 of 3 updated replicas are '
            "available...",
            1,
        ),
        (
            'Waiting for deployment "api" rollout to finish: 1 of 3 updated replicas are '
            "available...",
            1,
        ),
        (
            'Waiting for deployment "api" rollout to finish: 2 of 3 updated replicas are '
            "available...",
            1,
        ),
        (
            'Waiting for deployment "api" rollout to finish: 1 old replicas are pending '
            "termination...",
            1,
        ),
        ('deployment "api" successfully rolled out', 0),
    ]
    for n, (text, code) in enumerate(progress):
        if code:
            s.sh(
                watch,
                text + "\nerror: timed out waiting for the condition",
                error=f"exit status 1: {text}",
            )
        else:
            s.sh(watch, text)
        if n == 2:
            s.sh(
                f"kubectl get pods {ns} -l app=api",
                "NAME                   READY   STATUS    RESTARTS   AGE\n"
                "api-5f8e2a1c4-9hx2d   1/1     Running   0          41s\napi-5f8e2a1c4-qq7mc   "
                "0/1     Running   0          12s\n"
                "api-7b5c4d6f5-lm2p9   1/1     Running   0          2d",
            )
        if n == 4:
            s.sh(f"kubectl logs {ns} -l app=api --since=2m | grep -c ERROR", "0")
    s.sh(
        f"kubectl get pods {ns} -l app=api",
        "NAME                   READY   STATUS    RESTARTS   AGE\n"
        "api-5f8e2a1c4-9hx2d   1/1     Running   0          2m31s\napi-5f8e2a1c4-qq7mc   1/1     "
        "Running   0          2m2s\n"
        "api-5f8e2a1c4-z8n4b   1/1     Running   0          1m30s",
    )
    s.sh(
        f"kubectl logs {ns} api-5f8e2a1c4-9hx2d | head -3",
        "2025-03-14T10:02:11Z INFO starting api v2.31.0\n"
        "2025-03-14T10:02:11Z INFO config: pool size 20\n2025-03-14T10:02:12Z INFO listening on "
        ":8080",
    )
    s.sh(
        "curl -s -o /dev/null -w '%{http_code} %{time_total}\\n' https://api.example.com/healthz",
        "200 0.081",
    )
    s.sh(
        f"kubectl top pods {ns} -l app=api",
        "NAME                  CPU(cores)   MEMORY(bytes)\napi-5f8e2a1c4-9hx2d   112m         "
        "298Mi\n"
        "api-5f8e2a1c4-qq7mc   97m          301Mi\napi-5f8e2a1c4-z8n4b   105m         288Mi",
    )
    s.sh(
        f"kubectl get events {ns} --field-selector involvedObject.kind=Pod "
        f"--sort-by=.lastTimestamp | tail -3",
        "2m    Normal   Started   pod/api-5f8e2a1c4-z8n4b   Started container api\n"
        "2m    Normal   Pulled    pod/api-5f8e2a1c4-z8n4b   Container image already present\n"
        "1m    Normal   Killing   pod/api-7b5c4d6f5-lm2p9   Stopping container api",
    )
    s.sh(
        'psql "$PROD_RO_DSN" -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '
        "'api'\"",
        " count \n-------\n    60\n(1 row)",
    )
    s.sh(
        "cat >> deploy/k8s/prod/api-config.schema.json <<'EOF'\n{\"properties\": "
        '{"DATABASE_POOL_SIZE": {"type": "string", "pattern": "^[0-9]+$"}}}\nEOF'
    )
    s.sh(
        "grep -n 'kubeconform\\|schema' deploy/.github/workflows/validate.yml",
        "14:      - run: kubeconform -strict -summary k8s/",
    )
    s.sh(
        "sed -i '14a\\      - run: check-jsonschema --schemafile k8s/prod/api-config.schema.json "
        "<(yq .data k8s/prod/api-config.yaml)' deploy/.github/workflows/validate.yml"
    )
    s.sh(
        "check-jsonschema --schemafile deploy/k8s/prod/api-config.schema.json <(yq .data "
        "deploy/k8s/prod/api-config.yaml)",
        "ok -- validation done",
    )
    s.sh(
        "git -C deploy add -A && git -C deploy commit -qm 'prod: fix DATABASE_POOL_SIZE (trailing "
        "space); validate the api config in CI' && git -C deploy log --oneline -1",
        "b3c9d1e prod: fix DATABASE_POOL_SIZE (trailing space); validate the api config in CI",
    )
    s.sh(
        "git -C deploy push origin HEAD:fix/api-pool-size 2>&1 | tail -2",
        "remote: Create a pull request for 'fix/api-pool-size':\n"
        "remote:   https://github.com/acme/deploy/pull/new/fix/api-pool-size",
    )
    s.sh(
        "gh pr create -R acme/deploy --head fix/api-pool-size --title 'prod: fix "
        "DATABASE_POOL_SIZE' --body 'Trailing space broke config parsing.'",
        "https://github.com/acme/deploy/pull/812",
    )
    s.sh(
        "gh pr checks 812 -R acme/deploy",
        "validate  pending  0  https://github.com/acme/deploy/actions/runs/1",
    )
    s.sh(
        "gh pr checks 812 -R acme/deploy --watch --interval 10 | tail -2",
        "validate  pass  41s  https://github.com/acme/deploy/actions/runs/1\n"
        "All checks were successful",
    )
    s.sh(
        f"kubectl get deploy api {ns}",
        "NAME   READY   UP-TO-DATE   AVAILABLE   AGE\napi    3/3     3            3            "
        "212d",
    )
    s.sh(
        f"kubectl get pods {ns} -l app=api -o "
        f"jsonpath='{{.items[*].status.containerStatuses[0].restartCount}}'",
        "0 0 0",
    )
    s.reply(
        'Fixed. The morning\'s config change set `DATABASE_POOL_SIZE: "20 "` (trailing space); '
        "the api refused to start. "
        "I corrected the ConfigMap, restarted the deployment and watched it roll out: 3/3 pods "
        "running, no errors, health "
        "check 200, 60 DB connections (3 x 20). PR acme/deploy#812 commits the fix and adds a CI "
        "schema check for that "
        "config (checks pass)."
    )
    return s.session()


# -- 21. an OpenClaw agent: exec, process polls whose log grows, messages sent ---------------------


def _oc(text: str, details: Mapping[str, object]) -> dict[str, object]:
    """OpenClaw's tool result object."""
    return {"content": [{"type": "text", "text": text}], "details": dict(details)}


def openclaw_build_and_notify() -> Session:
    s = Script(
        "openclaw-build-and-notify",
        "openclaw",
        "claude-sonnet-4-5",
        "an OpenClaw agent builds a site in the background, polls its log as it grows, messages "
        "the team",
    )
    s.user(
        "Rebuild the docs site with the new release notes, deploy it, and tell #docs when it's "
        "live."
    )
    s.call(
        "read",
        {"path": "~/sites/docs/RELEASE_NOTES.md"},
        _oc(
            "# 4.2.0\n\n- Offline mode\n- Faster sync",
            {"path": "~/sites/docs/RELEASE_NOTES.md", "lines": 4},
        ),
    )
    s.call(
        "read",
        {"path": "~/sites/docs/package.json"},
        _oc(
            '{"name": "docs", "version": "4.2.0", "scripts": {"build": "docusaurus build"}}',
            {"path": "~/sites/docs/package.json", "lines": 1},
        ),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && git status --short"},
        _oc("", {"status": "completed", "exitCode": 0, "durationMs": 23, "aggregated": ""}),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && git pull --ff-only"},
        _oc(
            "Updating 1a2b3c4..5d6e7f8\nFast-forward\n docs/release-notes.md | 12 ++++++++++++",
            {
                "status": "completed",
                "exitCode": 0,
                "durationMs": 812,
                "aggregated": "Updating 1a2b3c4..5d6e7f8",
            },
        ),
    )
    s.call(
        "edit",
        {
            "path": "~/sites/docs/docs/release-notes.md",
            "oldText": "## Unreleased",
            "newText": "## 4.2.0 (2025-03-14)",
        },
        _oc("Edited ~/sites/docs/docs/release-notes.md", {"changed": True}),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && npm ci --silent"},
        _oc("", {"status": "completed", "exitCode": 0, "durationMs": 18234, "aggregated": ""}),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && npm run build", "background": True},
        _oc(
            "Started in the background: session 7",
            {"status": "running", "sessionId": "7", "pid": 48211, "tail": "> docs@4.2.0 build"},
        ),
    )
    log_lines = [3, 19, 47, 61, 88, 131, 150, 176, 204, 231]
    for n, total in enumerate(log_lines):
        s.call(
            "process",
            {"action": "log", "sessionId": "7", "offset": max(0, total - 5)},
            _oc(
                f"[build] rendered {total * 4} pages",
                {
                    "status": "running",
                    "totalLines": total,
                    "totalChars": total * 61,
                    "truncated": False,
                },
            ),
        )
        if n in (2, 5):
            s.call(
                "process",
                {"action": "poll", "sessionId": "7"},
                _oc(
                    "still running",
                    {"status": "running", "aggregated": f"[build] rendered {total * 4} pages"},
                ),
            )
    s.call(
        "process",
        {"action": "poll", "sessionId": "7"},
        _oc(
            "Build finished",
            {
                "status": "completed",
                "exitCode": 0,
                "aggregated": "[build] rendered 931 pages in 212.4s\n[build] done",
            },
        ),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && npx linkinator build --recurse --silent | tail -3"},
        _oc(
            "ERROR: 2 broken links\n  /docs/sync#conflicts -> 404\n  /docs/offline -> 404",
            {
                "status": "failed",
                "exitCode": 1,
                "durationMs": 30211,
                "aggregated": "ERROR: 2 broken links",
            },
        ),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && grep -rn '/docs/offline\\|sync#conflicts' docs | head"},
        _oc(
            "docs/release-notes.md:5:- [Offline mode](/docs/offline)\ndocs/release-notes.md:6:- "
            "[Faster sync](/docs/sync#conflicts)",
            {
                "status": "completed",
                "exitCode": 0,
                "durationMs": 41,
                "aggregated": "docs/release-notes.md:5",
            },
        ),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && ls docs/guides | head -20"},
        _oc(
            "offline-mode.md\nsync.md\ninstall.md",
            {
                "status": "completed",
                "exitCode": 0,
                "durationMs": 9,
                "aggregated": "offline-mode.md",
            },
        ),
    )
    s.call(
        "edit",
        {
            "path": "~/sites/docs/docs/release-notes.md",
            "oldText": "(/docs/offline)",
            "newText": "(/docs/guides/offline-mode)",
        },
        _oc("Edited ~/sites/docs/docs/release-notes.md", {"changed": True}),
    )
    s.call(
        "edit",
        {
            "path": "~/sites/docs/docs/release-notes.md",
            "oldText": "(/docs/sync#conflicts)",
            "newText": "(/docs/guides/sync#conflicts)",
        },
        _oc("Edited ~/sites/docs/docs/release-notes.md", {"changed": True}),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && npm run build", "background": True},
        _oc(
            "Started in the background: session 8",
            {"status": "running", "sessionId": "8", "pid": 48790, "tail": "> docs@4.2.0 build"},
        ),
    )
    for total in (11, 58, 120, 197, 231):
        s.call(
            "process",
            {"action": "log", "sessionId": "8", "offset": max(0, total - 5)},
            _oc(
                f"[build] rendered {total * 4} pages",
                {
                    "status": "running",
                    "totalLines": total,
                    "totalChars": total * 61,
                    "truncated": False,
                },
            ),
        )
    s.call(
        "process",
        {"action": "poll", "sessionId": "8"},
        _oc(
            "Build finished",
            {
                "status": "completed",
                "exitCode": 0,
                "aggregated": "[build] rendered 931 pages in 208.9s\n[build] done",
            },
        ),
    )
    s.call(
        "exec",
        {"command": "cd ~/sites/docs && npx linkinator build --recurse --silent | tail -1"},
        _oc(
            "Successfully scanned 931 pages, 0 broken links",
            {
                "status": "completed",
                "exitCode": 0,
                "durationMs": 29877,
                "aggregated": "0 broken links",
            },
        ),
    )
    s.call(
        "exec",
        {
            "command": "cd ~/sites/docs && npx wrangler pages deploy build --project-name docs "
            "--branch main | tail -2"
        },
        _oc(
            "Deployment complete! https://docs.example.com",
            {
                "status": "completed",
                "exitCode": 0,
                "durationMs": 41120,
                "aggregated": "Deployment complete!",
            },
        ),
    )
    s.call(
        "web_fetch",
        {"url": "https://docs.example.com/release-notes"},
        _oc("4.2.0 (2025-03-14) Offline mode Faster sync", {"status": 200}),
    )
    s.call(
        "web_fetch",
        {"url": "https://docs.example.com/docs/guides/sync"},
        _oc("Sync ... Conflicts: when two devices edit ...", {"status": 200}),
    )
    s.call(
        "exec",
        {
            "command": "cd ~/sites/docs && git add -A && git commit -qm 'release notes: 4.2.0' && "
            "git push -q && git log --oneline -1"
        },
        _oc(
            "9f0e1d2 release notes: 4.2.0",
            {"status": "completed", "exitCode": 0, "durationMs": 1730, "aggregated": "9f0e1d2"},
        ),
    )
    s.call(
        "message",
        {
            "action": "send",
            "channel": "slack",
            "to": "#docs",
            "message": "Docs for 4.2.0 are live: https://docs.example.com/release-notes",
        },
        _oc(
            "sent", {"ok": True, "messageId": "m-551", "ts": "1741947012.0012", "channel": "C0DOCS"}
        ),
    )
    s.call(
        "message",
        {
            "action": "send",
            "channel": "slack",
            "to": "@lena",
            "message": "Fixed two broken links in the 4.2.0 notes (offline mode, sync conflicts) "
            "before deploying.",
        },
        _oc(
            "sent", {"ok": True, "messageId": "m-552", "ts": "1741947013.0040", "channel": "D0LENA"}
        ),
    )
    s.reply(
        "Deployed: https://docs.example.com/release-notes shows 4.2.0. I fixed two broken links "
        "first, and posted in #docs."
    )
    return s.session()


# -- 22. a notebook analysis through a Python code tool --------------------------------------------


def notebook_analysis() -> Session:
    s = Script(
        "notebook-analysis",
        "jupyter-agent",
        "qwen3-coder",
        "an A/B test analysed cell by cell with execute_python: load, clean, test, plot, write up",
    )

    def py(code: str, output: str, error: str | None = None) -> None:
        s.call("execute_python", {"code": code}, None if error else output, error=error)

    s.user(
        "Analyse the checkout A/B test in data/ab_checkout.parquet: did variant B improve "
        "conversion?"
    )
    py(
        "import pandas as pd\ndf = pd.read_parquet('data/ab_checkout.parquet')\ndf.shape",
        "(184212, 7)",
    )
    py(
        "df.head()",
        "   user_id variant  session_start  converted  revenue  country device\n0  u_00001       "
        "A  2025-02-01 ...  0  0.0  DE  mobile",
    )
    py(
        "df.dtypes",
        "user_id object\nvariant object\nsession_start datetime64[ns]\nconverted int64\nrevenue "
        "float64\ncountry object\ndevice object",
    )
    py(
        "df['variant'].value_counts()",
        "A    92480\nB    91697\nb       35\nName: count, dtype: int64",
    )
    py(
        "df['variant'] = df['variant'].str.upper()\ndf['variant'].value_counts()",
        "A    92480\nB    91732\nName: count, dtype: int64",
    )
    py("df['user_id'].duplicated().sum()", "1877")
    py(
        "dupes = df[df['user_id'].duplicated(keep=False)]\n"
        "dupes.groupby('user_id')['variant'].nunique().value_counts()",
        "1    1710\n2     167\nName: count, dtype: int64",
    )
    py(
        "crossed = dupes.groupby('user_id')['variant'].nunique().loc[lambda s: s > 1].index\n"
        "df = df[~df['user_id'].isin(crossed)].sort_values('session_start').drop_duplicates('user"
        "_id')\nlen(df)",
        "180958",
    )
    py(
        "df.groupby('variant')['converted'].agg(['mean', 'sum', 'count'])",
        "             mean   sum  count\nvariant                        \nA        0.031152  2830 "
        " 90845\nB        0.034072  3070  90113",
    )
    py(
        "from statsmodels.stats.proportion import proportions_ztest\n"
        "z, p = proportions_ztest([3070, 2830], [90113, 90845])\nz, p",
        "",
        error="ModuleNotFoundError: No module named 'statsmodels'",
    )
    s.call(
        "run_shell",
        {"command": "pip install -q statsmodels==0.14.4"},
        "Successfully installed patsy-1.0.1 statsmodels-0.14.4",
    )
    py(
        "from statsmodels.stats.proportion import proportions_ztest\n"
        "z, p = proportions_ztest([3070, 2830], [90113, 90845])\nz, p",
        "(3.5016, 0.000462)",
    )
    py(
        "from statsmodels.stats.proportion import confint_proportions_2indep\n"
        "confint_proportions_2indep(3070, 90113, 2830, 90845, compare='diff')",
        "(0.001288, 0.004553)",
    )
    py(
        "df.groupby(['device', 'variant'])['converted'].mean().unstack()",
        "variant         A         B\ndevice                     \ndesktop  0.041210  0.041733\n"
        "mobile   0.024338  0.029160",
    )
    py(
        "for device, g in df.groupby('device'):\n    c = "
        "g.groupby('variant')['converted'].agg(['sum', 'count'])\n"
        "    print(device, proportions_ztest(c['sum'][::-1], c['count'][::-1]))",
        "desktop (0.3875, 0.6984)\nmobile (4.3314, 1.48e-05)",
    )
    py(
        "df.groupby('variant')['revenue'].describe()",
        "          count      mean       std  min  25%  50%  75%     max\nA  90845.0  2.1873  "
        "17.02  0.0  0.0  0.0  0.0  1840.5\n"
        "B  90113.0  2.3391  17.47  0.0  0.0  0.0  0.0  1902.2",
    )
    py(
        "from scipy import stats\nstats.mannwhitneyu(df.loc[df.variant == 'B', 'revenue'], "
        "df.loc[df.variant == 'A', 'revenue'])",
        "MannwhitneyuResult(statistic=4121183302.5, pvalue=0.000519)",
    )
    py(
        "buyers = df[df.converted == 1]\nbuyers.groupby('variant')['revenue'].mean()",
        "variant\nA    70.21\nB    68.66\nName: revenue, dtype: float64",
    )
    py(
        "stats.ttest_ind(buyers.loc[buyers.variant == 'B', 'revenue'], buyers.loc[buyers.variant "
        "== 'A', 'revenue'], equal_var=False)",
        "TtestResult(statistic=-0.8127, pvalue=0.4164, df=5887.3)",
    )
    py(
        "daily = df.set_index('session_start').groupby([pd.Grouper(freq='D'), "
        "'variant'])['converted'].mean().unstack()\n"
        "daily.describe().loc[['mean', 'min', 'max']]",
        "variant         A         B\nmean     0.031120  0.034101\nmin      0.024810  0.027702\n"
        "max      0.037433  0.041018",
    )
    py("(daily['B'] > daily['A']).mean()", "0.8214285714285714")
    py(
        "import matplotlib.pyplot as plt\nax = daily.rolling(7).mean().plot(figsize=(8, 3), "
        "title='7-day conversion')\n"
        "plt.savefig('out/conversion.png', dpi=120, bbox_inches='tight')",
        "",
        error="FileNotFoundError: [Errno 2] No such file or directory: 'out/conversion.png'",
    )
    py(
        "import os\nos.makedirs('out', exist_ok=True)\nplt.savefig('out/conversion.png', dpi=120, "
        "bbox_inches='tight')\nos.path.getsize('out/conversion.png')",
        "48213",
    )
    py(
        "srm = stats.chisquare([90845, 90113])\nsrm",
        "Power_divergenceResult(statistic=2.9616, pvalue=0.0853)",
    )
    py(
        "df.groupby('country')['variant'].value_counts(normalize=True).unstack().round(3).head(6)",
        "variant      A      B\ncountry              \nAT       0.502  0.498\nDE       0.501  "
        "0.499\nES       0.499  0.501\nFR       0.503  0.497\n"
        "IT       0.498  0.502\nNL       0.500  0.500",
    )
    py("mde = 2.8 * (0.0312 * (1 - 0.0312) * 2 / 90000) ** 0.5\nround(mde, 5)", "0.00229")
    py("lift = 0.034072 / 0.031152 - 1\nround(100 * lift, 1)", "9.4")
    py(
        "summary = pd.DataFrame({'conv_A': [0.03115], 'conv_B': [0.03407], 'lift_pct': [9.4], "
        "'p': [0.00046],\n"
        "    'ci_low': [0.00129], 'ci_high': [0.00455]})\nsummary.to_csv('out/summary.csv', "
        "index=False)\nsummary",
        "    conv_A   conv_B  lift_pct        p   ci_low  ci_high\n0  0.03115  0.03407       9.4  "
        "0.00046  0.00129  0.00455",
    )
    s.call(
        "write_file",
        {
            "path": "out/README.md",
            "content": "# Checkout A/B test\n\nB converts 3.41 % vs 3.12 % (+9.4 %, p = 0.0005, "
            "95 % CI of the difference 0.13 to 0.46 points). The effect is on mobile only. "
            "Revenue per buyer unchanged. "
            "167 users seen in both variants were excluded; 35 lower-case 'b' labels fixed.",
        },
        "Wrote 312 bytes to out/README.md",
    )
    s.reply(
        "Yes. Variant B converts at 3.41 % vs 3.12 % for A: +9.4 % relative (p = 0.0005; 95 % CI "
        "for the difference "
        "+0.13 to +0.46 points), and B led on 82 % of days. The gain is entirely on mobile (2.43 "
        "% → 2.92 %, p < 0.0001); "
        "desktop is flat. Revenue per buyer didn't change (p = 0.42), so revenue per user rises "
        "with conversion. "
        "Data fixes: 35 'b' labels upper-cased, 167 users exposed to both variants removed, "
        "duplicates kept at first "
        "session. No sample-ratio mismatch (p = 0.085). Plot and summary in out/."
    )
    s.user("Can you also check whether new vs returning users differ?")
    py(
        "df['returning'] = df['user_id'].isin(pd.read_parquet('data/customers.parquet')['user_id'"
        "])\n"
        "df.groupby(['returning', 'variant'])['converted'].mean().unstack()",
        "variant           A         B\nreturning                    \nFalse      0.021904  "
        "0.025911\nTrue       0.052610  0.053402",
    )
    py(
        "for r, g in df.groupby('returning'):\n    c = "
        "g.groupby('variant')['converted'].agg(['sum', 'count'])\n"
        "    print(r, proportions_ztest(c['sum'][::-1], c['count'][::-1]))",
        "False (4.5021, 6.7e-06)\nTrue (0.4411, 0.6591)",
    )
    py(
        "pd.crosstab(df['returning'], df['device'], normalize='index').round(2)",
        "device     desktop  mobile\nreturning                \nFalse         0.31    0.69\nTrue  "
        "        0.58    0.42",
    )
    py(
        "import statsmodels.formula.api as smf\nm = smf.logit('converted ~ C(variant) * C(device) "
        "+ returning', data=df.assign(returning=df.returning.astype(int))).fit(disp=0)\n"
        "m.params.round(3)",
        "Intercept                            -3.442\nC(variant)[T.B]                      0.012\n"
        "C(device)[T.mobile]                 -0.398\n"
        "C(variant)[T.B]:C(device)[T.mobile]  0.176\nreturning                            0.751",
    )
    py(
        "m.pvalues.round(4)",
        "Intercept                            0.0000\nC(variant)[T.B]                      0.8120\n"
        "C(device)[T.mobile]                  0.0000\nC(variant)[T.B]:C(device)[T.mobile]  0.0071\n"
        "returning                            0.0000",
    )
    py(
        "df['hour'] = df['session_start'].dt.hour\ndf.groupby(pd.cut(df['hour'], [0, 6, 12, 18, "
        "24], right=False))['converted'].mean().round(4)",
        "hour\n[0, 6)      0.0221\n[6, 12)     0.0338\n[12, 18)    0.0347\n[18, 24)    0.0301\n"
        "Name: converted, dtype: float64",
    )
    py(
        "import numpy as np\nrng = np.random.default_rng(7)\na = df.loc[df.variant == 'A', "
        "'converted'].to_numpy()\n"
        "b = df.loc[df.variant == 'B', 'converted'].to_numpy()\n"
        "boot = [rng.choice(b, b.size).mean() - rng.choice(a, a.size).mean() for _ in "
        "range(2000)]\nnp.percentile(boot, [2.5, 97.5]).round(5)",
        "array([0.00127, 0.00458])",
    )
    py(
        "m.summary2().tables[0].iloc[:6, :2]",
        "                0                 1\n0          Model:             Logit\n1  Dependent "
        "Variable:  converted\n"
        "2          Date:  2025-03-14 10:22\n3  No. Observations:  180958\n4      Df Model:  4\n5 "
        " Df Residuals:  180953",
    )
    py(
        "summary.assign(new_user_lift_pct=[18.3], "
        "mobile_lift_pct=[19.8]).to_csv('out/summary.csv', index=False)\n"
        "open('out/summary.csv').read()",
        "conv_A,conv_B,lift_pct,p,ci_low,ci_high,new_user_lift_pct,mobile_lift_pct\n"
        "0.03115,0.03407,9.4,0.00046,0.00129,0.00455,18.3,19.8\n",
    )
    s.reply(
        "New users drive it: B lifts new-user conversion from 2.19 % to 2.59 % (p < 0.0001) while "
        "returning users are "
        "flat (5.26 % vs 5.34 %, p = 0.66). New users are mostly on mobile (69 %), and a logistic "
        "model with device, "
        "returning status and their interaction keeps only the mobile x B effect (p = 0.007): B's "
        "new mobile checkout "
        "helps mobile users, who are mostly new."
    )
    return s.session()


# -- 23. SWE-agent's own commands: open, goto, scroll, search, edit N:M ----------------------------


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
"""SWE-agent 0.x's own commands: each a tool of its own (as ``recorded/trajectories.py`` reads
them)."""


def sweagent_edit_commands() -> Session:
    s = Script(
        "sweagent-edit-commands",
        "swe-agent",
        "gpt-4o",
        "SWE-agent's open/goto/scroll/search_file and edit N:M commands fix an issue and verify it",
    )

    def do(command: str, output: str) -> None:
        # As SWE-agent's trajectories are read (recorded/trajectories.py): its own commands are
        # tools of their own, anything else is bash; an edit its linter refused failed.
        word = command.split(maxsplit=1)[0]
        tool = word if word in SWE_AGENT_COMMANDS else "bash"
        refused = tool == "edit" and output.startswith(
            "Your proposed edit has introduced new syntax error"
        )
        s.call(tool, {"command": command}, output, error=output if refused else None)

    def window(path: str, first: int, lines: Sequence[str], total: int) -> str:
        return (
            f"[File: {path} ({total} lines total)]\n({first - 1} more lines above)\n"
            + "\n".join(f"{first + i}:{line}" for i, line in enumerate(lines))
            + f"\n({max(0, total - first - len(lines) + 1)} more lines below)"
        )

    path = "/astropy__astropy/astropy/units/quantity.py"
    do("create reproduce.py", "[File: /astropy__astropy/reproduce.py (1 lines total)]\n1:")
    do(
        "edit 1:1\nimport astropy.units as u\nq = u.Quantity([1, 2], u.m)\n"
        "print(q.to_string(precision=2))\nprint('Script completed successfully, no errors.')\n"
        "end_of_edit",
        "[File: /astropy__astropy/reproduce.py (4 lines total)]\n1:import astropy.units as u\n2:q "
        "= u.Quantity([1, 2], u.m)\n"
        "3:print(q.to_string(precision=2))\n4:print('Script completed successfully, no errors.')\n"
        "File updated. Please review the changes and make sure "
        "they are correct (correct indentation, no duplicate lines, etc). Edit the file again if "
        "necessary.",
    )
    do(
        "python reproduce.py",
        'Traceback (most recent call last):\n  File "/astropy__astropy/reproduce.py", line 3, in '
        "<module>\n"
        "    print(q.to_string(precision=2))\n  File "
        '"/astropy__astropy/astropy/units/quantity.py", line 1405, in to_string\n'
        "    formatter = {'float_kind': lambda x: f'{x:.{precision}f}'}\nTypeError: unsupported "
        "format string passed to numpy.ndarray.__format__",
    )
    do(
        "find_file quantity.py astropy/units",
        'Found 1 matches for "quantity.py" in /astropy__astropy/astropy/units:\n'
        "/astropy__astropy/astropy/units/quantity.py",
    )
    do(
        "open astropy/units/quantity.py 1390",
        window(path, 1344, [f"    # line {n}" for n in range(1344, 1444)], 2210),
    )
    do(
        'search_file "def to_string" astropy/units/quantity.py',
        'Found 1 matches for "def to_string" in '
        + path
        + ":\nLine 1356:    def to_string(self, unit=None, precision=None, format=None, "
        "subfmt=None):\nEnd of matches",
    )
    do("goto 1356", window(path, 1306, [f"    # line {n}" for n in range(1306, 1406)], 2210))
    do("scroll_down", window(path, 1406, [f"    # line {n}" for n in range(1406, 1506)], 2210))
    do(
        'search_file "float_kind" astropy/units/quantity.py',
        'Found 2 matches for "float_kind" in ' + path + ":\n"
        "Line 1405:            formatter = {'float_kind': lambda x: f'{x:.{precision}f}'}\nLine "
        "1431:                formatter=formatter,\nEnd of matches",
    )
    do("scroll_up", window(path, 1306, [f"    # line {n}" for n in range(1306, 1406)], 2210))
    do(
        'search_file "precision" astropy/units/quantity.py',
        'Found 4 matches for "precision" in ' + path + ":\n"
        "Line 1356:    def to_string(self, unit=None, precision=None, format=None, subfmt=None):\n"
        "Line 1371:        precision : int, optional\n"
        "Line 1404:        if precision is not None:\nLine 1405:            formatter = "
        "{'float_kind': lambda x: f'{x:.{precision}f}'}\nEnd of matches",
    )
    do("goto 1400", window(path, 1350, [f"    # line {n}" for n in range(1350, 1450)], 2210))
    do(
        "edit 1404:1406\n        if precision is not None:\n            formatter = "
        "{'float_kind': lambda x: f'{x:.{precision}f}'}\n"
        "            value = np.array2string(self.value, formatter=formatter)\nend_of_edit",
        "Your proposed edit has introduced new syntax error(s). Please read this error message "
        "carefully and then retry editing the file.\n\n"
        "ERRORS:\n- E999 IndentationError: unexpected indent\n\nThis is how your edit would have "
        "looked if applied\n...\nYour changes have NOT been applied.",
    )
    do("goto 1398", window(path, 1348, [f"    # line {n}" for n in range(1348, 1448)], 2210))
    do(
        "edit 1403:1406\n        if precision is not None:\n            formatter = "
        "{'float_kind': lambda x: f'{x:.{precision}f}'}\n"
        "        else:\n            formatter = None\nend_of_edit",
        window(path, 1353, [f"    # line {n}" for n in range(1353, 1453)], 2210)
        + "\nFile updated. Please review the changes and make sure they "
        "are correct (correct indentation, no duplicate lines, etc). Edit the file again if "
        "necessary.",
    )
    do("python reproduce.py", "[1.00 2.00] m\nScript completed successfully, no errors.")
    do(
        "edit 3:3\nprint(q.to_string(precision=2))\nprint(u.Quantity(1.23456, "
        "u.s).to_string(precision=3))\nprint(q.to_string())\nend_of_edit",
        "[File: /astropy__astropy/reproduce.py (6 lines total)]\n"
        "3:print(q.to_string(precision=2))\n4:print(u.Quantity(1.23456, "
        "u.s).to_string(precision=3))\n"
        "5:print(q.to_string())\nFile updated. Please review the changes and make sure they are "
        "correct (correct indentation, no duplicate "
        "lines, etc). Edit the file again if necessary.",
    )
    do(
        "python reproduce.py",
        "[1.00 2.00] m\n1.235 s\n[1. 2.] m\nScript completed successfully, no errors.",
    )
    do(
        'search_dir "to_string(precision" astropy/units/tests',
        'Found 3 matches for "to_string(precision" in /astropy__astropy/astropy/units/tests:\n'
        "/astropy__astropy/astropy/units/tests/test_quantity.py (3 matches)\nEnd of matches for "
        '"to_string(precision" in /astropy__astropy/astropy/units/tests',
    )
    do(
        "open astropy/units/tests/test_quantity.py 980",
        window(
            "/astropy__astropy/astropy/units/tests/test_quantity.py",
            930,
            [f"    # test line {n}" for n in range(930, 1030)],
            1880,
        ),
    )
    do(
        'search_file "def test_to_string" astropy/units/tests/test_quantity.py',
        'Found 2 matches for "def test_to_string" in '
        "/astropy__astropy/astropy/units/tests/test_quantity.py:\n"
        "Line 961:def test_to_string_precision():\nLine 975:def test_to_string_latex():\nEnd of "
        "matches",
    )
    do(
        "goto 961",
        window(
            "/astropy__astropy/astropy/units/tests/test_quantity.py",
            911,
            [f"    # test line {n}" for n in range(911, 1011)],
            1880,
        ),
    )
    do(
        "edit 974:974\n\n\ndef test_to_string_precision_array():\n    q = u.Quantity([1, 2], u.m)\n"
        "    assert q.to_string(precision=2) == '[1.00 2.00] m'\n\nend_of_edit",
        window(
            "/astropy__astropy/astropy/units/tests/test_quantity.py",
            924,
            [f"    # test line {n}" for n in range(924, 1024)],
            1886,
        )
        + "\nFile updated. Please review the changes and make sure they are correct (correct "
        "indentation, no duplicate lines, etc). "
        "Edit the file again if necessary.",
    )
    do(
        "python -m pytest astropy/units/tests/test_quantity.py -q -k to_string 2>&1 | tail -2",
        "........                                                                 [100%]\n8 "
        "passed, 401 deselected in 1.94s",
    )
    do(
        "python -m pytest astropy/units/tests/test_quantity.py -q 2>&1 | tail -2",
        "409 passed, 3 skipped, 2 xfailed in 19.37s",
    )
    do(
        "python -m pytest astropy/units/tests -q -x 2>&1 | tail -2",
        "3206 passed, 31 skipped, 9 xfailed in 88.12s (0:01:28)",
    )
    do(
        'search_dir "array2string" astropy/units',
        'Found 2 matches for "array2string" in /astropy__astropy/astropy/units:\n'
        "/astropy__astropy/astropy/units/quantity.py (2 matches)\nEnd of matches for "
        '"array2string" in /astropy__astropy/astropy/units',
    )
    do("goto 1425", window(path, 1375, [f"    # line {n}" for n in range(1375, 1475)], 2212))
    do(
        "edit 1430:1432\n                formatter=formatter,\n                separator=' ',\n"
        "end_of_edit",
        window(path, 1380, [f"    # line {n}" for n in range(1380, 1480)], 2212)
        + "\nFile updated. Please review the changes and make sure "
        "they are correct (correct indentation, no duplicate lines, etc). Edit the file again if "
        "necessary.",
    )
    do(
        "python reproduce.py",
        "[1.00 2.00] m\n1.235 s\n[1. 2.] m\nScript completed successfully, no errors.",
    )
    do(
        "python -m pytest astropy/units/tests/test_quantity.py -q -k to_string 2>&1 | tail -2",
        "........                                                                 [100%]\n8 "
        "passed, 401 deselected in 1.88s",
    )
    do(
        "open docs/changes/units/README.rst",
        "[File: /astropy__astropy/docs/changes/units/README.rst (3 lines total)]\n1:Changelog "
        "fragments go here.",
    )
    do(
        "create docs/changes/units/16201.bugfix.rst",
        "[File: /astropy__astropy/docs/changes/units/16201.bugfix.rst (1 lines total)]\n1:",
    )
    do(
        "edit 1:1\n``Quantity.to_string`` with ``precision`` now works for array quantities.\n"
        "end_of_edit",
        "[File: /astropy__astropy/docs/changes/units/16201.bugfix.rst (1 lines total)]\n"
        "1:``Quantity.to_string`` with ``precision`` now works "
        "for array quantities.\nFile updated. Please review the changes and make sure they are "
        "correct (correct indentation, no duplicate "
        "lines, etc). Edit the file again if necessary.",
    )
    do("python -m flake8 astropy/units/quantity.py --select=E9,F63,F7,F82", "")
    do(
        "git diff --stat",
        " astropy/units/quantity.py                 |  6 ++++--\n "
        "astropy/units/tests/test_quantity.py      |  6 ++++++\n"
        " docs/changes/units/16201.bugfix.rst      |  1 +\n 3 files changed, 11 insertions(+), 2 "
        "deletions(-)",
    )
    do("rm reproduce.py", "")
    do(
        'python -c "import astropy.units as u; print(u.Quantity([[1, 2], [3, 4]], '
        'u.km).to_string(precision=1))"',
        "[[1.0 2.0]\n [3.0 4.0]] km",
    )
    do(
        "python -m pytest astropy/units/tests/test_quantity_array_methods.py -q 2>&1 | tail -1",
        "166 passed in 3.02s",
    )
    do("submit", "diff --git a/astropy/units/quantity.py b/astropy/units/quantity.py\n...")
    return s.session()


# -- 24. docs written page by page with Write, the site built as they land -------------------------


def docs_pages_written() -> Session:
    s = Script(
        "docs-pages-written",
        "claude-code",
        "claude-sonnet-4-5",
        "a user guide written page by page with Write, mkdocs build --strict run after each few "
        "pages",
        shell="Bash",
    )
    root = "/home/dev/hydra"
    s.user(
        "Write user docs for the CLI: one page per command, plus an index, in docs/cli/. Keep "
        "mkdocs --strict green."
    )
    commands = [
        "init",
        "login",
        "deploy",
        "logs",
        "rollback",
        "env",
        "secrets",
        "scale",
        "domains",
        "status",
        "destroy",
        "completion",
    ]
    todo_write(
        s,
        [(f"Document {c}", "pending") for c in commands[:6]]
        + [("Document the other commands", "pending"), ("Nav and build", "pending")],
    )
    s.call(
        "Glob",
        {"pattern": "src/hydra/commands/*.py", "path": root},
        "\n".join(f"{root}/src/hydra/commands/{c}.py" for c in commands),
    )
    s.call(
        "Read",
        {"file_path": f"{root}/mkdocs.yml"},
        arrowed(
            [
                "site_name: Hydra",
                "theme: material",
                "nav:",
                "  - Home: index.md",
                "  - Install: install.md",
                "markdown_extensions:",
                "  - admonition",
            ]
        ),
    )
    s.call(
        "Bash",
        {"command": "mkdocs build --strict 2>&1 | tail -2", "description": "Build the docs first"},
        "INFO    -  Building documentation to directory: /home/dev/hydra/site\nINFO    -  "
        "Documentation built in 0.61 seconds",
    )
    built = 2
    for n, command in enumerate(commands, start=1):
        s.call(
            "Bash",
            {"command": f"hydra {command} --help", "description": f"Show {command}'s help"},
            f"Usage: hydra {command} "
            f"[OPTIONS]{' NAME' if command in ('init', 'env', 'secrets', 'domains') else ''}\n\n"
            f"  {command.title()} ...\n\nOptions:\n  --app TEXT  The app (default: from "
            f"hydra.toml)\n"
            + ("  --follow    Stream new lines\n" if command == "logs" else "")
            + ("  --to TEXT   The release to roll back to\n" if command == "rollback" else "")
            + "  --help      Show this message and exit.",
        )
        s.call(
            "Write",
            {
                "file_path": f"{root}/docs/cli/{command}.md",
                "content": f"# hydra {command}\n\n{command.title()} an app's ...\n\n```console\n$ "
                f"hydra {command} --app shop\n```\n\n"
                f"## Options\n\n| option | meaning |\n|---|---|\n| `--app` | the app (default: "
                f"from `hydra.toml`) |\n",
            },
            f"File created successfully at: {root}/docs/cli/{command}.md",
        )
        if n % 3 == 0:
            built += 1
            s.call(
                "Bash",
                {
                    "command": "mkdocs build --strict 2>&1 | tail -2",
                    "description": "Build the docs",
                },
                "INFO    -  The following pages exist in the docs directory, but are not included "
                'in the "nav" configuration:\n'
                + "".join(f"  - cli/{c}.md\n" for c in commands[:n])
                + f"INFO    -  Documentation built in 0.{60 + built * 3} seconds",
            )
        if n == 6:
            todo_write(
                s,
                [(f"Document {c}", "completed") for c in commands[:6]]
                + [("Document the other commands", "in_progress"), ("Nav and build", "pending")],
            )
    s.call(
        "Write",
        {
            "file_path": f"{root}/docs/cli/index.md",
            "content": "# CLI reference\n\n"
            + "".join(f"- [`hydra {c}`]({c}.md)\n" for c in commands),
        },
        f"File created successfully at: {root}/docs/cli/index.md",
    )
    s.call(
        "Edit",
        {
            "file_path": f"{root}/mkdocs.yml",
            "old_string": "  - Install: install.md\n",
            "new_string": "  - Install: install.md\n  - CLI:\n    - cli/index.md\n"
            + "".join(f"    - cli/{c}.md\n" for c in commands),
        },
        edited(
            f"{root}/mkdocs.yml", ["  - Install: install.md", "  - CLI:", "    - cli/index.md"], 5
        ),
    )
    s.call(
        "Bash",
        {"command": "mkdocs build --strict 2>&1 | tail -3", "description": "Build the docs"},
        None,
        error="WARNING -  Doc file 'cli/index.md' contains a link 'completion.md', but the target "
        "'cli/completion.md' is not found among documentation files.\n"
        "Aborted with 1 warnings in strict mode!",
    )
    s.call(
        "Bash",
        {"command": f"ls {root}/docs/cli", "description": "List the pages"},
        "\n".join(sorted(f"{c}.md" for c in commands[:-1])) + "\nindex.md",
    )
    s.call(
        "Write",
        {
            "file_path": f"{root}/docs/cli/completion.md",
            "content": "# hydra completion\n\nPrint a shell completion script.\n\n"
            "```console\n$ hydra completion zsh > ~/.zfunc/_hydra\n```\n",
        },
        f"File created successfully at: {root}/docs/cli/completion.md",
    )
    s.call(
        "Bash",
        {"command": "mkdocs build --strict 2>&1 | tail -2", "description": "Build the docs"},
        "INFO    -  Building documentation to directory: /home/dev/hydra/site\nINFO    -  "
        "Documentation built in 0.74 seconds",
    )
    s.call(
        "Bash",
        {"command": "npx markdownlint-cli2 'docs/cli/*.md'", "description": "Lint the markdown"},
        "markdownlint-cli2 v0.14.0 (markdownlint v0.35.0)\nFinding: docs/cli/*.md\nLinting: 13 "
        "file(s)\nSummary: 0 error(s)",
    )
    todo_write(
        s,
        [(f"Document {c}", "completed") for c in commands[:6]]
        + [("Document the other commands", "completed"), ("Nav and build", "completed")],
    )
    s.reply(
        "Wrote docs/cli/ with an index and one page per command (12), added them to the nav; "
        "`mkdocs build --strict` "
        "and markdownlint pass."
    )
    return s.session()


# -- 25. Gemini CLI upgrades a dependency across a monorepo's packages -----------------------------


def gemini_monorepo_upgrade() -> Session:
    s = Script(
        "gemini-monorepo-upgrade",
        "gemini-cli",
        "gemini-2.5-pro",
        "zod upgraded package by package in a monorepo: replace, npm install, that package's tests",
        shell="run_shell_command",
    )

    def sh(command: str, output: str, description: str = "", code: int = 0) -> None:
        s.call(
            "run_shell_command",
            {"command": command, "description": description or command.split()[0]},
            f"Command: {command}\nDirectory: (root)\nStdout: {output}\nStderr: (empty)\nError: "
            f"(none)\n"
            f"Exit Code: {code}\nSignal: (none)\nBackground PIDs: (none)\nProcess Group PGID: "
            f"{40100 + len(s.items)}",
        )

    s.user(
        "Upgrade zod from 3.22 to 3.23 in every package of the monorepo and make sure each "
        "package's tests pass."
    )
    s.call(
        "write_todos",
        {
            "todos": [
                {"description": "Find packages that depend on zod", "status": "in_progress"},
                {"description": "Upgrade and test each package", "status": "pending"},
                {"description": "Run the whole build", "status": "pending"},
            ]
        },
        "Successfully updated the todo list.",
    )
    s.call(
        "glob",
        {"pattern": "packages/*/package.json"},
        'Found 9 file(s) matching "packages/*/package.json":\n'
        + "\n".join(
            f"/repo/packages/{p}/package.json"
            for p in ("api", "auth", "billing", "cli", "core", "jobs", "search", "ui", "web")
        ),
    )
    s.call(
        "search_file_content",
        {"pattern": '"zod":', "include": "packages/*/package.json"},
        "Found 7 matches\n"
        + "\n".join(
            f'packages/{p}/package.json:L{line}: "zod": "^3.22.4"'
            for p, line in (
                ("api", 21),
                ("auth", 17),
                ("billing", 19),
                ("cli", 24),
                ("core", 12),
                ("jobs", 15),
                ("web", 30),
            )
        ),
    )
    s.call(
        "web_fetch",
        {
            "prompt": "Summarize breaking changes in "
            "https://github.com/colinhacks/zod/releases/tag/v3.23.0"
        },
        "3.23.0: no breaking changes; deprecates z.string().ip() options name 'version' -> use "
        "z.string().ip({ version }) unchanged; "
        "adds z.string().date(), .time(), .duration(); .base64(); stricter inference for "
        "discriminated unions with literals.",
    )
    s.call(
        "write_todos",
        {
            "todos": [
                {"description": "Find packages that depend on zod", "status": "completed"},
                {"description": "Upgrade and test each package", "status": "in_progress"},
                {"description": "Run the whole build", "status": "pending"},
            ]
        },
        "Successfully updated the todo list.",
    )
    s.call(
        "search_file_content",
        {"pattern": "discriminatedUnion|\\.ip\\(", "include": "packages/*/src/**/*.ts"},
        "Found 3 matches\npackages/billing/src/schema.ts:L1: export const Line = "
        "z.discriminatedUnion('kind', [\n"
        "packages/api/src/events.ts:L8: export const Event = z.discriminatedUnion('type', [\n"
        "packages/auth/src/session.ts:L22:   ip: z.string().ip(),",
    )
    s.call(
        "read_file",
        {"absolute_path": "/repo/packages/api/src/events.ts"},
        "export const Event = z.discriminatedUnion('type', [\n  z.object({ type: "
        "z.literal('created'), id: z.string() }),\n"
        "  z.object({ type: z.literal('deleted'), id: z.string(), at: z.string().datetime() }),\n"
        "]);",
    )
    s.call(
        "read_file",
        {"absolute_path": "/repo/package.json"},
        '{"name": "monorepo", "private": true, "workspaces": ["packages/*"]}',
    )
    packages = [
        ("core", 12, 88),
        ("auth", 17, 41),
        ("api", 21, 137),
        ("billing", 19, 64),
        ("jobs", 15, 29),
        ("cli", 24, 52),
        ("web", 30, 113),
    ]
    for n, (package, _, tests) in enumerate(packages):
        s.call(
            "replace",
            {
                "file_path": f"/repo/packages/{package}/package.json",
                "old_string": '"zod": "^3.22.4"',
                "new_string": '"zod": "^3.23.8"',
            },
            f"Successfully modified file: /repo/packages/{package}/package.json (1 replacements).",
        )
        sh(
            f"npm install -w packages/{package} --no-audit --no-fund",
            f"changed {1 + n % 2} packages in {2 + n % 3}s",
            "Install",
        )
        if package == "billing":
            sh(
                f"npm test -w packages/{package} -- --reporter=dot",
                "FAIL  src/invoice.test.ts > parses a refund line\n"
                "TypeError: Cannot read properties of undefined (reading 'amount')\n Tests  1 "
                "failed | 63 passed (64)",
                "Run the package's tests",
                1,
            )
            s.call(
                "read_file",
                {"absolute_path": "/repo/packages/billing/src/schema.ts"},
                "export const Line = z.discriminatedUnion('kind', [\n  z.object({ kind: "
                "z.literal('charge'), amount: z.number() }),\n"
                "  z.object({ kind: z.literal('refund'), refund: z.object({ amount: z.number() }) "
                "}).passthrough(),\n]);",
            )
            s.call(
                "replace",
                {
                    "file_path": "/repo/packages/billing/src/invoice.ts",
                    "old_string": "  const amount = line.amount ?? line.refund.amount;",
                    "new_string": "  const amount = line.kind === 'charge' ? line.amount : "
                    "-line.refund.amount;",
                },
                "Successfully modified file: /repo/packages/billing/src/invoice.ts (1 "
                "replacements).",
            )
        sh(
            f"npm test -w packages/{package} -- --reporter=dot",
            f" Test Files  {tests // 9 + 1} passed\n      Tests  {tests} passed ({tests})\n"
            f"   Duration  {1 + tests / 50:.2f}s",
            "Run the package's tests",
        )
    s.call(
        "write_todos",
        {
            "todos": [
                {"description": "Find packages that depend on zod", "status": "completed"},
                {"description": "Upgrade and test each package", "status": "completed"},
                {"description": "Run the whole build", "status": "in_progress"},
            ]
        },
        "Successfully updated the todo list.",
    )
    sh(
        "npm ls zod --all | grep -v deduped | head",
        "monorepo@0.0.0 /repo\n"
        + "".join(
            f"├─┬ @acme/{p}@1.0.0 -> ./packages/{p}\n│ └── zod@3.23.8\n" for p, _, _ in packages[:3]
        ),
        "Check versions",
    )
    sh(
        "npm run build --workspaces --if-present 2>&1 | tail -3",
        "> @acme/web@1.0.0 build\n> vite build\n✓ built in 7.81s",
        "Build everything",
    )
    sh("npx tsc -b --pretty false", "(empty)", "Typecheck")
    sh(
        "npm test --workspaces --if-present -- --reporter=dot 2>&1 | grep -E 'Tests +[0-9]'",
        "\n".join(f"      Tests  {t} passed ({t})" for _, _, t in packages),
        "All tests",
    )
    sh(
        "git status --short",
        " M package-lock.json\n"
        + "".join(f" M packages/{p}/package.json\n" for p, _, _ in packages)
        + " M packages/billing/src/invoice.ts",
        "Status",
    )
    s.call(
        "write_todos",
        {
            "todos": [
                {"description": "Find packages that depend on zod", "status": "completed"},
                {"description": "Upgrade and test each package", "status": "completed"},
                {"description": "Run the whole build", "status": "completed"},
            ]
        },
        "Successfully updated the todo list.",
    )
    s.reply(
        "zod is now 3.23.8 in all 7 packages that use it. Only billing needed a change: 3.23 "
        "types the refund line of the "
        "discriminated union strictly, which exposed `line.amount ?? line.refund.amount`; it now "
        "branches on `kind`. Every "
        "package's tests, the typecheck and the build pass."
    )
    return s.session()


BUILDERS: tuple[Builder, ...] = (
    sed_rename_refactor,
    claude_edit_rename,
    api_fix_file_by_file,
    quiet_edits_green_tests,
    fix_rerun_until_green,
    flaky_test_reruns,
    revert_to_confirm,
    paginated_inventory_audit,
    cursor_channel_digest,
    poll_export_with_sleep,
    poll_ci_without_sleep,
    airline_rebooking_conversation,
    retail_support_with_policy_questions,
    assistant_send_message_and_think,
    crm_update_and_reread,
    explore_with_sed_views,
    warehouse_queries,
    heredoc_script_until_it_works,
    claude_code_feature,
    codex_apply_patch_cargo,
    web_research_report,
    openclaw_build_and_notify,
    notebook_analysis,
    sweagent_edit_commands,
    docs_pages_written,
    gemini_monorepo_upgrade,
)
"""Every session, in the order the tests list them."""


def build_all() -> tuple[Session, ...]:
    """Every session, built afresh (each build gives the same session: no clock, no randomness)."""
    return tuple(build() for build in BUILDERS)


SESSIONS = build_all()
