"""The shared store on a real Redis Cluster (three masters on 127.0.0.1): each update is one
script call on one key, so scopes spread over the nodes' slots and are shared as on one server.

Two guards with a store and a cluster client each stand for two processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from otel_loopguard import LoopGuard, RedisStore

from .helpers import events, rig, tool_span
from .redis_server import RedisClusterServers

CONVERSATION = {"enabled": True, "scope": "conversation"}
CONVERSATIONS = [f"conv-{n}" for n in range(12)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServers]:
    servers = RedisClusterServers()
    servers.start()
    yield servers
    servers.close()


def cluster_store(cluster: RedisClusterServers, prefix: str) -> RedisStore:
    # A generous bound on each update (conflicts retried included), as the multi-process tests
    # give theirs: these tests are about what is shared, and a loaded 2-core machine can take
    # more than the default 50 ms for a retried update, which would count as a fallback.
    return RedisStore(client=cluster.client(), key_prefix=prefix, timeout=10.0)


def levels_of(guards: list[LoopGuard]) -> dict[str, list[str]]:
    """Each conversation's verdicts, 25 calls taking turns between ``guards``."""
    seen: dict[str, list[str]] = {}
    for conversation in CONVERSATIONS:
        seen[conversation] = [
            guards[n % len(guards)].check("read_file", {"path": "a"}, scope=conversation).level
            for n in range(25)
        ]
    return seen


def test_scopes_on_several_nodes_are_shared_as_on_one_process(
    cluster: RedisClusterServers, prefix: str
) -> None:
    shared = [LoopGuard(CONVERSATION, store=cluster_store(cluster, prefix)) for _ in range(2)]
    alone = [LoopGuard(CONVERSATION)]  # one process, in memory: the reference
    expected = levels_of(alone)
    assert levels_of(shared) == expected
    assert expected["conv-0"][9:11] == ["ok", "warning"]  # the history did add up
    # The scopes' keys are spread over the nodes, each node holding its slots' keys.
    holders = {
        node.port
        for node in cluster.nodes
        for key in node.client().keys(f"{prefix}*")
        if key.decode().rsplit(":", 1)[-1] in CONVERSATIONS
    }
    assert len(holders) == len(cluster.nodes)
    for guard in shared:
        assert guard.stats().fallbacks == 0


def test_spans_of_one_conversation_share_warnings_and_blocks_across_the_cluster(
    cluster: RedisClusterServers, prefix: str
) -> None:
    workers = [rig(CONVERSATION, store=cluster_store(cluster, prefix)) for _ in range(2)]
    for n in range(21):
        r = workers[n % 2]
        with r.tracer.start_as_current_span(
            "invoke_agent chat", attributes={"gen_ai.conversation.id": "conv-cluster"}
        ):
            tool_span(r.tracer, "read_file", {"path": "a.txt"}, "same")
    spans = [w.spans("execute_tool read_file") for w in workers]
    calls: list[Any] = [spans[n % 2][n // 2] for n in range(21)]
    assert [c.attributes.get("loopguard.level") for c in calls] == (
        [None] * 10 + ["warning"] * 10 + ["critical"]
    )
    assert [len(events(c)) for c in calls] == [0] * 10 + [1] + [0] * 9 + [1]


def test_a_trace_scope_is_released_on_its_node_when_its_root_ends(
    cluster: RedisClusterServers, prefix: str
) -> None:
    r = rig({"enabled": True}, store=cluster_store(cluster, prefix))
    with r.tracer.start_as_current_span("invoke_agent run"):
        tool_span(r.tracer, "read_file", {"path": "a"}, "same")
        assert sum(len(n.client().keys(f"{prefix}*")) for n in cluster.nodes) == 1
    assert sum(len(n.client().keys(f"{prefix}*")) for n in cluster.nodes) == 0
