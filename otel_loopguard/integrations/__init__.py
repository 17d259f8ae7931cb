"""Adapters for agent frameworks that need more than ``guard.check()`` to stop a run.

Import the one for your framework (``otel_loopguard.integrations.smolagents``,
``otel_loopguard.integrations.langgraph``); each imports its framework, so ``import
otel_loopguard`` never does.
"""
