"""What tests build and run against, one concern per module.

- `builders`: the one `Tenant` and the rows of its data: forms, schemas, destinations,
  routes, submissions and deliveries.
- `seed`: one row in every tenant table for an organization (data model, row-level security).
- `records`: reading rows back as the owner.
- `settings`: the test secret key, the mail sender, services built with other settings.
- `databases`: creating, cloning and dropping test databases (the harness in conftest uses it).
- `api`, `submit`, `dashboard`: clients for the three HTTP surfaces over ASGI.
- `peers`: real HTTP peers on loopback (webhook receivers, a fake Telegram API).
- `files`: real sample files of each accepted type, and whether a store holds an upload.
- `lambdas`, `cli`: calling a handler as the Lambda runtime does, running `postbag`.
"""
