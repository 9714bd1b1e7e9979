"""What an owner configures and reads: organizations and keys, plans and usage, forms and
their schemas, destinations, routes, alerts and events."""
