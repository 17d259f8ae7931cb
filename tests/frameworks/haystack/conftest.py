"""Haystack reads ``HAYSTACK_TELEMETRY_ENABLED`` once, as it is imported: set here, before the
suite imports it, so no test calls home (the pages' processes inherit it)."""

import os

os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
