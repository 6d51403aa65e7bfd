"""Preference (DPO, IPO, SimPO) and supervised (SFT) losses.

For a pair (chosen y_w, rejected y_l) with token log-probs and masks, S(y) = sum_t m_t log pi(y_t),
|y| = sum_t m_t, and the reference model's S_ref(y):

* ``dpo``    h = beta [(S(y_w) - S_ref(y_w)) - (S(y_l) - S_ref(y_l))]
             loss = -(1 - ls) log sigma(h) - ls log sigma(-h)          (Rafailov et al. 2023;
             ls = label_smoothing, the conservative-DPO form of TRL)
* ``ipo``    g = (S(y_w) - S_ref(y_w)) - (S(y_l) - S_ref(y_l));  loss = (g - 1/(2 beta))^2
             (Azar et al. 2023, eq. 17, on sequence sums as the paper; TRL length-averages)
* ``simpo``  h = beta S(y_w)/|y_w| - beta S(y_l)/|y_l| - gamma
             loss = -(1 - ls) log sigma(h) - ls log sigma(-h)          (Meng et al. 2024; no ref)

Implicit rewards (metrics): DPO/IPO beta (S - S_ref); SimPO beta S/|y|. ``preference_loss`` adds
``pref_ftx`` times an SFT term on the chosen response, averaged over pairs (the seed work needed
it after plain SimPO produced garbled text); ``sft_term`` picks its form:

* ``mean_token``  -S(y_w)/|y_w|  (per-token NLL, length-free scale: the seed code's
                                  ``-policy_chosen_log_probs``, whose trainer has already
                                  divided the log-probs by the length; LLaMA-Factory's
                                  ``pref_ftx``)
* ``sum``         -S(y_w)        (the sequence NLL, summed over the chosen tokens: it grows with
                                  the response length)
Every registered loss: fn(ops, chosen_logp, chosen_mask, rejected_logp, rejected_mask,
ref_chosen_logp, ref_rejected_logp, *, beta, label_smoothing, gamma) -> (per-pair loss (B,),
chosen reward (B,), rejected reward (B,)).
"""

from __future__ import annotations

from typing import Callable, Optional

from mindrl.registry import Registry

from .aggregation import aggregate

PREFERENCE_LOSSES: Registry[Callable] = Registry("preference loss")

# preference.sft_term -> the aggregation of -log pi(y_w,t) over the chosen response's tokens
SFT_TERMS = {"mean_token": "seq_mean_token_mean", "sum": "seq_mean_token_sum"}


def _seq_sum(ops, logp, mask):
    return ops.sum(logp * ops.as_float(mask, like=logp), axis=-1)


def _seq_len(ops, logp, mask):
    return ops.maximum(ops.sum(ops.as_float(mask, like=logp), axis=-1), 1.0)


def _ref_margins(ops, cl, cm, rl, rm, ref_cl, ref_rl, name):
    if ref_cl is None or ref_rl is None:
        raise ValueError(f"preference loss '{name}' needs reference log-probs "
                         "(ref_chosen_logp, ref_rejected_logp)")
    chosen = _seq_sum(ops, cl, cm) - _seq_sum(ops, ref_cl, cm)
    rejected = _seq_sum(ops, rl, rm) - _seq_sum(ops, ref_rl, rm)
    return chosen, rejected


def _smoothed_sigmoid_loss(ops, h, label_smoothing):
    loss = -ops.log_sigmoid(h)
    if label_smoothing:
        loss = (1.0 - label_smoothing) * loss - label_smoothing * ops.log_sigmoid(-h)
    return loss


@PREFERENCE_LOSSES.register("dpo")
def dpo(ops, chosen_logp, chosen_mask, rejected_logp, rejected_mask, ref_chosen_logp=None,
        ref_rejected_logp=None, *, beta=0.1, label_smoothing=0.0, gamma=0.0):
    """Sigmoid DPO with optional label smoothing; gamma is ignored."""
    c, r = _ref_margins(ops, chosen_logp, chosen_mask, rejected_logp, rejected_mask,
                        ref_chosen_logp, ref_rejected_logp, "dpo")
    h = beta * (c - r)
    return _smoothed_sigmoid_loss(ops, h, label_smoothing), beta * c, beta * r


@PREFERENCE_LOSSES.register("ipo")
def ipo(ops, chosen_logp, chosen_mask, rejected_logp, rejected_mask, ref_chosen_logp=None,
        ref_rejected_logp=None, *, beta=0.1, label_smoothing=0.0, gamma=0.0):
    """IPO squared loss towards the margin 1/(2 beta); label_smoothing and gamma ignored."""
    c, r = _ref_margins(ops, chosen_logp, chosen_mask, rejected_logp, rejected_mask,
                        ref_chosen_logp, ref_rejected_logp, "ipo")
    return ops.square(c - r - 1.0 / (2.0 * beta)), beta * c, beta * r


@PREFERENCE_LOSSES.register("simpo")
def simpo(ops, chosen_logp, chosen_mask, rejected_logp, rejected_mask, ref_chosen_logp=None,
          ref_rejected_logp=None, *, beta=2.0, label_smoothing=0.0, gamma=0.5):
    """SimPO: length-normalised log-probs, target margin gamma, no reference model."""
    c = beta * _seq_sum(ops, chosen_logp, chosen_mask) / _seq_len(ops, chosen_logp, chosen_mask)
    r = beta * _seq_sum(ops, rejected_logp, rejected_mask) / _seq_len(ops, rejected_logp,
                                                                       rejected_mask)
    return _smoothed_sigmoid_loss(ops, c - r - gamma, label_smoothing), c, r


def sft_nll(ops, logp, mask, agg_mode: str = "token_mean", *, global_tokens=None,
            global_seqs=None, max_len=None):
    """Masked token negative log-likelihood -log pi(y_t), aggregated like the RL losses
    (default token_mean over ``global_tokens``)."""
    return aggregate(ops, -logp, mask, agg_mode, global_tokens=global_tokens,
                     global_seqs=global_seqs, max_len=max_len)


def preference_loss(ops, *, chosen_logp, chosen_mask, rejected_logp, rejected_mask,
                    ref_chosen_logp=None, ref_rejected_logp=None, cfg,
                    global_pairs: Optional[float] = None):
    """Scalar loss = sum_pairs [pref_loss + pref_ftx * sft(y_w)] / global_pairs, with sft(y_w) =
    -S(y_w)/|y_w| (``sft_term: mean_token``) or -S(y_w) (``sft_term: sum``).

    ``cfg`` is a ``PreferenceConfig`` (duck-typed: loss, beta, label_smoothing, gamma,
    pref_ftx, sft_term (absent = mean_token)). ``global_pairs`` is the number of pairs in the
    whole batch (all micro-batches and ranks; None = this call's) so partial losses sum to the
    full-batch loss. Metrics (no gradient): pref_loss, sft_loss, reward_accuracy,
    reward_margin, reward_chosen, reward_rejected (means over this call's pairs).
    """
    fn = PREFERENCE_LOSSES.get(cfg.loss)
    if ref_chosen_logp is not None:
        ref_chosen_logp = ops.as_float(ref_chosen_logp, like=chosen_logp)
    if ref_rejected_logp is not None:
        ref_rejected_logp = ops.as_float(ref_rejected_logp, like=rejected_logp)
    per_pair, chosen_reward, rejected_reward = fn(
        ops, chosen_logp, chosen_mask, rejected_logp, rejected_mask, ref_chosen_logp,
        ref_rejected_logp, beta=cfg.beta, label_smoothing=cfg.label_smoothing, gamma=cfg.gamma)
    n = float(chosen_mask.shape[0]) if global_pairs is None else float(global_pairs)
    n = max(n, 1.0)
    # over chosen responses, seq_mean_token_mean = mean over pairs of -S(y_w)/|y_w|;
    # seq_mean_token_sum = mean over pairs of -S(y_w)
    sft = sft_nll(ops, chosen_logp, chosen_mask, SFT_TERMS[getattr(cfg, "sft_term", "mean_token")],
                  global_seqs=n)
    pref = ops.sum(per_pair) / n
    loss = pref + cfg.pref_ftx * sft if cfg.pref_ftx else pref
    sg = ops.stop_gradient
    c, r = sg(chosen_reward), sg(rejected_reward)
    metrics = {
        "pref_loss": ops.mean(sg(per_pair)),
        "sft_loss": sg(sft) * (n / float(chosen_mask.shape[0])),
        "reward_accuracy": ops.mean(ops.as_float(c > r, c)),
        "reward_margin": ops.mean(c - r),
        "reward_chosen": ops.mean(c),
        "reward_rejected": ops.mean(r),
    }
    return loss, metrics
