"""The dashboard at `/app`: server-rendered pages over the same `core` functions as `/v1`."""
