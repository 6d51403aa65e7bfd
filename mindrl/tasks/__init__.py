"""Synthetic tasks generated on the fly (no data files): the CPU demo's arithmetic task."""
