"""Detection: pure functions over a scope's history that find loops, escalate them and
weigh what they cost. One detector, one module."""
