"""Scope state: a scope's history and verdicts, the store that holds scopes, and the codec
that carries a scope between processes."""
