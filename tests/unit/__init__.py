"""Tests that need no server and start no process of their own: the pure core, settings, the CLI's output,
the rules checked on the source (layers, imports, errors). Seconds in all."""
