"""The submit path: reading a body, checking it, storing it with its deliveries in one
statement, and waking the worker."""
