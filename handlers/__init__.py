"""One thin module per cloud function; each exposes `handler(event, context)`."""
