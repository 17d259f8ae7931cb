"""Per-agent overrides: the same loop, run by two agents with different settings.

"safe-runner" (a small model) gets the rolling detectors with warning 8 / critical 16; any other
agent follows the global block, which here turns detection off.

Run: python examples/per_agent_override.py
     (needs the json5 package for loopguard.json5: pip install json5)
"""

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuard, LoopGuardSpanProcessor

provider = TracerProvider()
guard = LoopGuard(Path(__file__).with_name("loopguard.json5"), tracer_provider=provider)
provider.add_span_processor(LoopGuardSpanProcessor(guard))
tracer = provider.get_tracer("example")


@guard.tool
def read_file(path: str) -> str:
    return f"contents of {path}"


for agent in ("safe-runner", "flagship"):
    # The agent is read from gen_ai.agent.name on the tool span or its nearest ancestor.
    with tracer.start_as_current_span(
        f"invoke_agent {agent}", attributes={"gen_ai.agent.name": agent}
    ):
        first_warning = blocked_at = None
        for call in range(1, 26):
            result = read_file("notes.txt")
            if "WARNING:" in result and first_warning is None:
                first_warning = call
            if result.startswith("CRITICAL:"):
                blocked_at = call
                break
    print(
        f"{agent}: first warning at call {first_warning or 'never'}, "
        f"blocked at call {blocked_at or 'never'}"
    )
