"""Spam defence: content rules, the fill-time token, duplicates and the learned filter."""
