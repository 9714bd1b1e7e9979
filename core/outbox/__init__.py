"""The outbox: claiming due deliveries under a lease, sending them, writing fenced
outcomes, backoff and storm throttling, and retry by hand."""
