"""The MindSpore sampler's host-side draw (mindrl.backends.mindspore.draw): inverse CDF in two
levels against hand-computed tokens and a float64 full-cumsum reference, the sampled
distribution against its probabilities (chi-square), greedy and the log-probs."""

import numpy as np
import pytest

from mindrl.backends.mindspore.draw import draw, greedy, inverse_cdf


def softmax64(logits, inv_temp):
    z = logits.astype(np.float64) * inv_temp
    p = np.exp(z - z.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


@pytest.mark.parametrize("block", [1, 3, 4, 64])
def test_inverse_cdf_hand_computed(block):
    # weights 1, 2, 3, 4 (total 10): cumulative 1, 3, 6, 10; token = #{i : C_i <= 10 u}
    w = np.array([[1.0, 2.0, 3.0, 4.0]] * 7, np.float32)
    u = np.array([0.0, 0.05, 0.1, 0.15, 0.35, 0.7, 0.999])
    tok, total = inverse_cdf(w, u, block=block)
    assert tok.tolist() == [0, 0, 1, 1, 2, 3, 3]
    np.testing.assert_array_equal(total, 10.0)
    # ids of weight 0 are never drawn, whatever the uniform
    z = np.tile(np.array([[0.0, 5.0, 0.0, 0.0, 5.0, 0.0]]), (201, 1))
    got, _ = inverse_cdf(z, np.append(np.linspace(0.0, 0.9999, 200), 1.0), block=block)
    assert set(got.tolist()) == {1, 4} and got[0] == 1 and got[-1] == 4


@pytest.mark.parametrize("V,block", [(1000, 64), (151_936, 256)])
def test_draw_equals_float64_full_cumsum(V, block):
    """The same token as a float64 softmax and one cumulative sum over the whole vocabulary
    (V = 1,000 leaves a shorter last block), log-probs equal log p[token]."""
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((4, V)) * 3).astype(np.float32)
    p = softmax64(logits, 1 / 0.7)
    cdf = np.cumsum(p, -1)
    for _ in range(25):
        u = rng.random(4)
        tok, lp = draw(logits, 1 / 0.7, u, block=block)
        np.testing.assert_array_equal(tok, (cdf <= u[:, None]).sum(-1))
        np.testing.assert_allclose(lp, np.log(p[np.arange(4), tok]), atol=2e-6)


def test_draw_distribution_chi_square():
    """40,000 draws from 7 ids at temperature 0.5 match softmax(logits / 0.5) (fixed seed; the
    statistic stays below the 0.1% critical value of chi-square with 6 degrees of freedom,
    22.46; drawing at temperature 1, or shifting tokens by one id, gives thousands)."""
    logits = np.array([1.0, 0.2, -0.5, 0.9, 0.0, -2.0, 0.6], np.float32)
    n = 40_000
    rng = np.random.default_rng(1)
    tok, lp = draw(np.tile(logits, (n, 1)), 2.0, rng.random(n), block=3)
    p = softmax64(logits[None], 2.0)[0]
    counts = np.bincount(tok, minlength=7)
    chi2 = float(((counts - n * p) ** 2 / (n * p)).sum())
    assert chi2 < 22.46, (chi2, counts, n * p)
    np.testing.assert_allclose(lp, np.log(p[tok]), atol=1e-6)


def test_greedy_argmax_and_logprob_at_temperature_one():
    logits = np.array([[0.5, 2.0, 2.0, -1.0], [3.0, 0.0, 1.0, 2.5]], np.float32)
    tok, lp = greedy(logits)
    assert tok.tolist() == [1, 0]                       # the first of a tie
    np.testing.assert_allclose(lp, np.log(softmax64(logits, 1.0)[[0, 1], [1, 0]]), atol=1e-7)
