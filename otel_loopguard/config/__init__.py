"""Configuration: the model, loading from mappings, files and the environment, and settings.

Imports neither the engine nor OpenTelemetry: settings hold plain data.
"""
