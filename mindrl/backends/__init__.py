"""Training backends. Import ``mindrl.backends.base`` for the protocol; the framework-specific
packages are imported lazily by :func:`mindrl.backends.base.build_backend`."""
