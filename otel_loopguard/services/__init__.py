"""Loop guarding outside the agent's process, over one layer for scopes, bounds and auth.

``mcp_proxy``: ``otel-loopguard mcp-proxy`` in front of any MCP server. ``serve``:
``otel-loopguard serve``, the verdict service for Claude Code and Codex hooks and an HTTP check.
Both use ``_base`` (where a service may listen, its bearer token, bounded bodies, scope keys and
the guard with its telemetry). Needs an extra: ``python3 -m pip install -e ".[mcp]"`` or
``".[serve]"`` from a clone.
"""
