"""Rewards for the loss smoke runs (dotted path smoke_rewards:...): signal even from an
untrained model, so advantages are non-zero and every loss moves the weights."""


def length_parity(completions, **_):
    """1.0 for an even-length completion, else 0.0."""
    return [float(len(text) % 2 == 0) for text in completions]


def has_digit(completions, **_):
    """A second, differently scaled component (for GDPO): 3.0 when the text has a digit."""
    return [3.0 * any(c.isdigit() for c in text) for text in completions]
