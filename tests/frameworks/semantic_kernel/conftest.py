"""Semantic Kernel reads its diagnostics settings once, when it is first imported: its agent
spans (``invoke_agent <name>``) are made only with this set before then."""

import os

os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"] = "true"
