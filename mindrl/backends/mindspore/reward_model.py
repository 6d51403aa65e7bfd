"""A Bradley-Terry reward model trained on the MindSpore backend (``mindrl rm --backend
mindspore``): the decoder of :mod:`mindrl.backends.mindspore.model` with the critic's scalar
head (:class:`~mindrl.backends.mindspore.critic.Qwen2ValueModel`), read at each text's last
token::

    r(text) = score(h_last)            h_last: final hidden state of the last real token
    loss    = sum_pairs w_i softplus(-(r(chosen_i) - r(rejected_i))) / sum_pairs w_i

(softplus(-d) = -log sigmoid(d); w_i = 0 for the rows that pad a batch to its fixed size).
Forward, loss and backward are one ``mindspore.jit`` graph per bucket shape (texts right-padded
to a power of two, batches to ``batch_size`` pairs), the gradients go to the backend's AdamW.
The model is written in Hugging Face format (``...ForSequenceClassification``, one label, the
decoder's weights and ``score.weight``), so the ``reward_model`` reward and transformers load
it; the head's bias, which the loss cannot move (it cancels in every difference), is dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Sequence

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.backends.critic_files import fresh_head
from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.critic import Qwen2ValueModel
from mindrl.backends.mindspore.model import Qwen2Spec


def _bucket(n: int) -> int:
    b = 8
    while b < n:
        b *= 2
    return b


class MindSporeRewardModel:
    def __init__(self, base: str, tok, chat: bool, max_len: int, lr: float,
                 weight_decay: float, seed: int, threads: int, device: str, batch_size: int,
                 head_std: float = 0.02):
        from mindrl.backends.mindspore.backend import DEVICE_TARGETS, _configure_threads
        from mindrl.backends.mindspore.optim import AdamW

        name = device.split(":")[0]
        target = DEVICE_TARGETS.get({"npu": "ascend"}.get(name, name), "CPU")
        _configure_threads(max(1, threads), on_cpu=target == "CPU")
        ms.set_context(mode=ms.PYNATIVE_MODE, device_target=target)
        ms.set_seed(seed)
        self.tok, self.chat, self.max_len, self.lr = tok, chat, max_len, lr
        self.pairs = batch_size
        self.hf_config = W.read_config(base)
        self.spec = Qwen2Spec.from_hf(self.hf_config)
        self.model = Qwen2ValueModel(self.spec, dtype=ms.float32)
        arrays = {k: v for k, v in W.iter_checkpoint(base) if k.startswith("model.")}
        arrays.update(fresh_head(self.spec.hidden_size, head_std, seed))
        W.load_into(self.model, arrays.items())
        self.params = self.model.trainable_params()
        self.opt = AdamW(self.params, weight_decay=weight_decay)
        model = self.model

        def values(ids, pos, att, last):
            h = model.hidden(ids, pos, att)                         # (B, S, H)
            h_last = (h * last.reshape(last.shape[0], last.shape[1], 1)).sum(1)
            return model.score(h_last.astype(ms.float32)).reshape(-1)    # (B,)

        def loss_fn(ids, pos, att, last, w):
            r = values(ids, pos, att, last)
            n = w.shape[0]
            d = r[:n] - r[n:]
            nll = ops.relu(-d) + ops.log(1.0 + ops.exp(-ops.abs(d)))     # softplus(-d)
            return (nll * w).sum() / w.sum()

        grad_fn = ms.value_and_grad(loss_fn, None, self.params)
        accumulate = self.opt.accumulate_in_graph

        def step(ids, pos, att, last, w):
            loss, grads = grad_fn(ids, pos, att, last, w)
            accumulate(grads)
            return loss

        self._values = ms.jit(values)
        self._step = ms.jit(step)

    # -- inputs -------------------------------------------------------------------------
    def _encode(self, problems: Sequence[str], responses: Sequence[str], rows: int):
        """Right-padded (ids, positions, attention, last-token one-hot) for ``rows`` rows
        (texts beyond those given are copies of the first, for a fixed shape)."""
        from rewards.reward_model import rm_text

        ids: List[List[int]] = []
        for p, r in zip(problems, responses):
            t = self.tok(rm_text(self.tok, p, r, self.chat), add_special_tokens=False)
            ids.append(list(t["input_ids"])[-self.max_len:])
        while len(ids) < rows:
            ids.append(ids[0])
        S = _bucket(max(len(x) for x in ids))
        pad = self.tok.pad_token_id
        x = np.full((rows, S), pad, np.int32)
        att = np.zeros((rows, S), np.float32)
        last = np.zeros((rows, S), np.float32)
        for i, row in enumerate(ids):
            x[i, :len(row)] = row
            att[i, :len(row)] = 1.0
            last[i, len(row) - 1] = 1.0
        pos = np.tile(np.arange(S, dtype=np.int32), (rows, 1))
        return Tensor(x), Tensor(pos), Tensor(att), Tensor(last)

    # -- the trainer's interface ---------------------------------------------------------
    def scores(self, problems, responses) -> np.ndarray:
        out = []
        rows = 2 * self.pairs
        for s in range(0, len(responses), rows):
            p, r = problems[s:s + rows], responses[s:s + rows]
            out.append(self._values(*self._encode(p, r, rows)).asnumpy()[:len(r)])
        return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)

    def step(self, problems, chosen, rejected) -> float:
        n = len(chosen)
        w = np.zeros(self.pairs, np.float32)
        w[:n] = 1.0
        pad = self.pairs - n
        texts_p = list(problems) + [problems[0]] * pad
        both = (list(chosen) + [chosen[0]] * pad) + (list(rejected) + [rejected[0]] * pad)
        loss = self._step(*self._encode(texts_p + texts_p, both, 2 * self.pairs), Tensor(w))
        self.opt.apply(self.lr, 0.0, self.opt.grad_norm())
        return float(loss.asnumpy())

    def save(self, out: Path) -> None:
        arrays = {k: v for k, v in W.named_arrays(self.model)
                  if k.startswith("model.") or k == "score.weight"}
        W.write_safetensors(str(Path(out) / "model.safetensors"), arrays, "float32",
                            metadata={"format": "pt"})
        cfg = dict(self.hf_config)
        arch = (cfg.get("architectures") or ["Qwen2ForCausalLM"])[0]
        cfg.update(architectures=[arch.replace("ForCausalLM", "ForSequenceClassification")],
                   id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0},
                   pad_token_id=self.tok.pad_token_id, torch_dtype="float32")
        cfg.pop("num_labels", None)
        (Path(out) / "config.json").write_text(json.dumps(cfg, indent=1))
