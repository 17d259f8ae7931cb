"""The ``otel-loopguard`` command: ``demo``, ``validate`` and their reports."""
