"""The single-process local runner and the `postbag` command line."""
