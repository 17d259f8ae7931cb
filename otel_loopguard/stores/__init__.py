"""State stores that processes share (the in-memory one is ``engine/store.py``).

They sit beside the engine: pure bookkeeping stays in the engine, the I/O is here, and nothing
here imports OpenTelemetry (the guard hands a store what it needs, such as suppressing
instrumentation around the store's own I/O).
"""
