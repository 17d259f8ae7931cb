"""Readers of recorded formats (OTLP trace files; agents' trajectories and transcripts), apart
from live span reading: each turns a recording into runs of tool calls for replay, and
``backtest`` replays them under one configuration or more."""
