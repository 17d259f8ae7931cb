"""Readers of recorded formats (OTLP trace files), apart from live span reading: each turns a
recording into runs of tool calls for replay."""
