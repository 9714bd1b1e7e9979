"""The platform every room stands on: database, named SQL, settings, errors, logs, ids,
storage, organization scope and the per-process services."""
