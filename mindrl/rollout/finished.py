"""Groups that finished early, reported while ``generate`` still runs the others.

:class:`GroupWatcher` rides along as a transformers logits processor (it reads the tokens
sampled so far and returns the scores unchanged): once every sample of a group has emitted a
stop token it calls ``on_group_done(group, responses)`` with the group's response token ids
(EOS included, as the engine returns them), so the caller can score that group while the
longest samples of other groups are still being generated. Groups that finish on the last step,
or by length, are never reported: the caller scores them after ``generate`` returns.
"""

from __future__ import annotations

from typing import Callable, List, Sequence


class GroupWatcher:
    def __init__(self, prompt_len: int, n: int, stop_ids: Sequence[int],
                 on_group_done: Callable[[int, List[List[int]]], None]):
        self.P, self.n = prompt_len, n
        self.stop = set(int(s) for s in stop_ids)
        self.on_group_done = on_group_done
        self.end: List[int] = []          # per row: response length once stopped, else -1
        self.reported: set = set()

    def __call__(self, input_ids, scores):
        B, t = input_ids.shape[0], input_ids.shape[1] - self.P
        if not self.end:
            self.end = [-1] * B
        if t <= 0:
            return scores
        last = input_ids[:, -1].tolist()
        for i in range(B):
            if self.end[i] < 0 and last[i] in self.stop:
                self.end[i] = t
        for g in range(B // self.n):
            if g in self.reported:
                continue
            rows = range(g * self.n, (g + 1) * self.n)
            if all(self.end[i] > 0 for i in rows):
                self.reported.add(g)
                resp = input_ids[g * self.n:(g + 1) * self.n, self.P:].tolist()
                self.on_group_done(g, [resp[j][:self.end[i]] for j, i in enumerate(rows)])
        return scores
