"""Launching workers: torchrun / msrun per node, Ray across nodes (:mod:`.launch`)."""
