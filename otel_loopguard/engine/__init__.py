"""The pure engine: digests, call records, detectors, the post-compaction guard and state.

Imports no OpenTelemetry and nothing from the layers above it (``tests/test_layers.py``).
"""
