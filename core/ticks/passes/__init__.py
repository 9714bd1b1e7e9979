"""The retention tick's maintenance passes, one module each (run by `retention.py`)."""
