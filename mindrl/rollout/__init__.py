"""Rollout engines behind one protocol (:mod:`mindrl.rollout.base`)."""
