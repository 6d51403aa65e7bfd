"""Fixtures for the torch backend tests: the tiny model built once per session."""

import dataclasses
import os

import numpy as np
import pytest


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    from mindrl.models.tiny import resolve_model_path

    cache = os.environ.get("MINDRL_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "cache")
    return resolve_model_path("builtin:tiny", cache_dir=cache)


def _make_cfg(model_path, **sections):
    """A RunConfig with ``sections`` = {"train": {...}, "algorithm": {...}} replaced."""
    from mindrl.config.schema import RunConfig

    cfg = RunConfig()
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, path=model_path))
    for name, fields in sections.items():
        if not isinstance(fields, dict):            # a top-level field (device, backend)
            cfg = dataclasses.replace(cfg, **{name: fields})
            continue
        cfg = dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name),
                                                                      **fields)})
    return cfg


def _fixed_batch(B=8, P=6, T=5, vocab=1000, seed=0, advantage=1.0):
    """A TrainBatch of random tokens with ragged prompts/responses and constant advantages."""
    from mindrl.types import TrainBatch, pad_token_batch

    rng = np.random.default_rng(seed)
    prompts = [rng.integers(3, vocab, rng.integers(2, P + 1)).tolist() for _ in range(B)]
    responses = [rng.integers(3, vocab, rng.integers(1, T + 1)).tolist() for _ in range(B)]
    tokens = pad_token_batch(prompts, responses, pad_id=0, prompt_len=P, response_len=T)
    adv = np.full((B, T), advantage, np.float32) * tokens.response_mask
    return TrainBatch(tokens, adv, np.zeros((B, T), np.float32))


@pytest.fixture(scope="session")
def make_cfg():
    return _make_cfg


@pytest.fixture(scope="session")
def fixed_batch():
    return _fixed_batch
