"""The ``testbed`` command line: one click group, one module per command family."""
