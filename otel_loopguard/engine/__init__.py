"""The pure engine, by concern: ``identity`` (what makes two calls or outcomes the same: names,
canonical forms, digests), ``state`` (a scope's history and verdicts, the store, the codec) and
``detection`` (the detectors, escalation, budgets and loop cost), over a shared vocabulary at
this level (``records``, ``usage``, ``verdict``, ``messages``).

Imports no OpenTelemetry and nothing from the layers above it (``tests/test_layers.py``);
detection imports neither identity nor state, so a detector is a pure function over records.
"""
