"""Stored submissions as their owner reads them: lists, receipts, erasure and CSV export."""
