"""The HTTP surfaces: the public submit app and the keyed management app."""
