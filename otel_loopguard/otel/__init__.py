"""OpenTelemetry glue: conventions, reading spans, live spans, the lifecycle, annotations,
metrics, internal errors and the runtime a guard shares with its processors."""
