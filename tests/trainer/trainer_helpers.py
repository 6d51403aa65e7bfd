"""Rewards used by the trainer tests (importable by dotted path: trainer_helpers:...)."""


def parity_reward(completions, problem, **_):
    """Problems whose first digit is even get 1.0 whatever the completion (their groups are
    uninformative); the others get 1.0 for an even-length completion, else 0.0."""
    out = []
    for text, prob in zip(completions, problem):
        if int(prob[0]) % 2 == 0:
            out.append(1.0)
        else:
            out.append(float(len(text) % 2 == 0))
    return out
