"""JSON Schemas that keep their word: the limits a schema must meet to be saved, the engine
that checks values against one (linear-time patterns, formats, no remote references), and
the checker that runs it in child processes under a time budget, off the event loop."""
