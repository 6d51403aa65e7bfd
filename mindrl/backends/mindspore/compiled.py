"""The compiled-step machinery shared by the RL, SFT and preference steps: one micro-batch
step compiled per (loss, flags, bucket shape) with gradient accumulation in the graph and,
in fused mode on one rank, the whole optimizer update in the last micro-batch's graph
(:meth:`CompiledStepMixin._fused_step`); compile counting and timing; the accumulate / all-reduce /
clip / AdamW / schedule path every ``*_step`` ends in (:meth:`CompiledStepMixin._optimizer_step`)."""

from __future__ import annotations

import logging
import math
from typing import Dict, Optional

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.backends.metrics import MetricMerger, finish
from mindrl.backends.mindspore.weights import write_param
from mindrl.backends.schedule import lr_factor
from mindrl.types import LossNormalizers, TokenBatch

# the backend's logger: its fallback warning has always come from there
log = logging.getLogger("mindrl.backends.mindspore.backend")


def token_logp(logits, targets):
    """(B, T) log-softmax of ``logits`` at the ``targets`` ids (traced into graphs)."""
    return ops.gather_elements(ops.log_softmax(logits, -1), 2,
                               targets.expand_dims(-1)).squeeze(-1)


def step_vector(loss, aux, extra=()):
    """``[loss, *aux, *extra]`` as one float32 vector (a single host sync per call)."""
    parts = (loss.reshape((1,)),)
    for v in aux + extra:
        parts = parts + (v.astype(ms.float32).reshape((1,)),)
    return ops.concat(parts, 0)


class CompiledStepMixin:
    """Compiling, running and accumulating micro-batch steps; the optimizer step."""

    def _note_compile(self, fn: str, key) -> bool:
        seen = self._seen.setdefault(fn, set())
        if key in seen:
            return False
        seen.add(key)
        self.compile_counts[fn] = len(seen)
        return True

    @property
    def compile_count(self) -> int:
        """Distinct shapes the compiled train step has seen (= its compilations)."""
        return self.compile_counts.get("train_step", 0)

    def _inputs(self, tb: TokenBatch):
        """(ids, positions, attention mask, targets, response mask) tensors of a re-padded
        batch. With routes to replay (``tb.routing``) the positions carry them
        (:func:`~mindrl.backends.mindspore.model.routes_into_positions`)."""
        pos = tb.position_ids
        if tb.routing is not None:
            from mindrl.backends.mindspore.model import routes_into_positions

            pos = routes_into_positions(pos, tb.routing)
        return (Tensor(tb.input_ids.astype(np.int32)), Tensor(pos.astype(np.int32)),
                Tensor(tb.attention_mask.astype(np.float32)),
                Tensor(tb.input_ids[:, tb.prompt_len:].astype(np.int32)),
                Tensor(tb.response_mask.astype(np.float32)))

    def _timed(self, fn_name: str, key, fn, *args):
        import time

        first = self._note_compile(fn_name, key)
        t0 = time.perf_counter()
        out = fn(*args)
        if first:
            leaf = out[0] if isinstance(out, tuple) else out
            leaf.asnumpy()                                   # wait for the result
            self.compile_seconds[fn_name] = self.compile_seconds.get(fn_name, 0.0) + \
                time.perf_counter() - t0
        return out

    def _fused_step(self, key, loss_fn, update: bool):
        """Compile ``loss_fn(*inputs) -> (loss, aux tuple)`` into a micro-batch step (cached
        under ``key``), shared by every loss (RL, SFT, preference).

        Without ``update``: ``fn(*inputs) -> [loss, *aux]``, the gradient w.r.t. the policy
        parameters added to the flat accumulator and the loss to ``_loss_acc``, one float32
        vector (one host sync). With ``update`` (fused mode, one rank): ``fn(*inputs, hyper)``
        also runs the whole optimizer step in the same graph -- total gradient = accumulator +
        this micro-batch's, norm, finite check (norm and total loss), clip, AdamW (``hyper`` =
        lr, clip, bias corrections) -- and returns ``[loss, *aux, grad_norm, updated]``."""
        if key in self._train_fns:
            return self._train_fns[key]
        accumulate = self.optimizer.accumulate_in_graph
        flatten = self.optimizer.flatten
        update_fn = self.optimizer.update_in_graph
        grad_flat = self.optimizer.grad_flat
        loss_acc = self._loss_acc
        grad_fn = ms.value_and_grad(loss_fn, None, self.params, has_aux=True)

        if not update:
            def step(*inputs):
                (loss, aux), grads = grad_fn(*inputs)
                accumulate(grads)                            # gradient accumulation, in graph
                ops.assign_add(loss_acc, loss.reshape((1,)))
                return step_vector(loss, aux)
        else:
            def step(*args):
                inputs, hyper = args[:-1], args[-1]
                (loss, aux), grads = grad_fn(*inputs)
                g = grad_flat.value() + flatten(grads)
                total_loss = (loss_acc.value() + loss.reshape((1,))).sum()
                norm, updated = update_fn(g, total_loss, hyper[0], hyper[1], hyper[2], hyper[3])
                ops.assign(loss_acc, ops.zeros_like(loss_acc))
                return step_vector(loss, aux, (norm, updated))

        self._train_fns[key] = ms.jit(step)
        return self._train_fns[key]

    def _step_fn(self, kind: str, flags, update: bool, chunk: int = 0):
        if kind == "sft":
            return self._sft_fn(update, chunk)
        if kind == "pref":
            return self._pref_fn(*flags, update=update, chunk=chunk)
        return self._train_fn(*flags, update=update, chunk=chunk)

    STEP_NAMES = {"rl": ("train_step", "accumulate_step"),
                  "sft": ("sft_step", "sft_accumulate_step"),
                  "pref": ("preference_step", "preference_accumulate_step")}

    def _run_step_fn(self, kind: str, flags, shape, args, hyper=None):
        """Call the compiled micro-batch step of ``kind`` (with the optimizer update when
        ``hyper`` is given and the update can run in the graph); if rl_loss cannot be compiled
        into the graph, fall back to the split RL step once (logged) -- nothing was accumulated
        or updated by the failed compile. Returns (output vector, metric keys, whether the
        update ran in the graph)."""
        # the LM head in chunks (train.logprob_chunk_tokens): its own step, update outside
        # (preference: the chosen and the rejected rows of ``shape[0]`` pairs)
        chunk = self._head_chunk(shape[0] * shape[2] * (2 if kind == "pref" else 1))
        # a large flat vector (optimizer.sliced): the update runs slice by slice after the step
        sliced = getattr(self.optimizer, "sliced", False)
        fused_update = hyper is not None and not chunk and not sliced and (
            kind != "rl" or self.train_mode == "fused")
        fn, keys = self._step_fn(kind, flags, fused_update, chunk)
        name = self.STEP_NAMES[kind][0 if hyper is not None else 1]
        mode = "chunked" if chunk else self.train_mode if kind == "rl" else "fused"
        extra = (hyper,) if fused_update else ()
        try:
            return self._timed(name, (shape,) + tuple(flags) + (mode,), fn,
                               *args, *extra), keys, fused_update
        except (RuntimeError, TypeError, ValueError, KeyError) as err:
            if kind != "rl" or self.train_mode != "fused" or chunk:
                raise
            reason = str(err).strip().splitlines()[0][:300]
            log.warning("algorithms.rl_loss does not compile into a MindSpore graph (%s); "
                        "falling back to the split step: compiled forward/backward, loss in "
                        "PyNative (slower)", reason)
            self.fallback_reason = reason
            self.train_mode = "split"
            self._seen.pop("train_step", None)
            self._seen.pop("accumulate_step", None)
            ms.runtime.launch_blocking()       # PyNative: ~6x faster (PLATFORM.md)
            fn, keys = self._train_fn(*flags)
            return self._timed(name, (shape,) + tuple(flags) + (self.train_mode,), fn,
                               *args), keys, False

    def _accumulate(self, kind: str, flags, shape, inputs, hyper: Optional[Tensor] = None):
        """Forward/backward every micro-batch (``inputs`` from ``_rl_inputs`` / ``_sft_inputs``)
        into the gradient accumulators; with ``hyper`` the last micro-batch's graph also runs
        the optimizer update. Returns the merged metrics (sums, maxes, mins), the
        response-token count of this rank and, when the update ran in the graph,
        (grad_norm, updated)."""
        outputs = []
        fused = None
        missing = self._micro_batches_missing(len(inputs))
        for i, (args, n_tok) in enumerate(inputs):
            last = i == len(inputs) - 1
            # ``shape``: one (rows, P, T) for every micro-batch, or a list of one each
            rows_shape = tuple(shape[i]) if isinstance(shape, list) else \
                (int(args[0].shape[0]),) + tuple(shape[1:])
            vec, keys, in_graph = self._run_step_fn(kind, flags, rows_shape, args,
                                                    hyper if last else None)
            outputs.append((vec, n_tok))
        for _ in range(missing):
            self.optimizer.reduce_nothing()
        self._loss_acc_clear_if_split(in_graph)
        merger = MetricMerger()
        names = ["loss"] + list(keys)
        for vec, n_tok in outputs:                   # one host sync per micro-batch
            arr = vec.asnumpy().astype(np.float64)
            if in_graph and vec is outputs[-1][0]:
                fused = (float(arr[-2]), bool(arr[-1] > 0.5))
            merger.add(zip(names, arr.tolist()), n_tok)
        return (*merger.parts(), fused)

    def _micro_batches_missing(self, count: int, optimizer=None) -> int:
        """With a sharded optimizer (default: the policy's) every micro-batch step reduces its
        gradient across the ranks, so every rank must run as many as the rank with the most:
        how many this rank lacks (0 otherwise; a collective before the first micro-batch when
        sharded)."""
        optimizer = self.optimizer if optimizer is None else optimizer
        if not getattr(optimizer, "sharded", False) or self.world == 1:
            return 0
        most = -self.all_reduce_sum(np.array([-float(count)]), op="min")[0]
        return int(round(most)) - count

    def _loss_acc_clear_if_split(self, updated_in_graph: bool = True) -> None:
        # The split step and the accumulate-only graphs leave the loss sum in ``_loss_acc``;
        # only the fused update graph consumes it (not run when the last micro-batch took the
        # chunked head). Zero it in place (the compiled graphs keep the Parameter's storage;
        # set_data would give it a new tensor they never see).
        if self.train_mode != "fused" or self.world > 1 or not updated_in_graph:
            write_param(self._loss_acc, np.zeros(1, np.float32))

    def _prepare(self, kind: str, micro_batches, norm):
        prepare = {"rl": self._rl_inputs, "sft": self._sft_inputs, "pref": self._pref_inputs}
        return prepare[kind](micro_batches, norm)

    def gradients(self, micro_batches, norm: LossNormalizers, kind: str = "rl"
                  ) -> Dict[str, np.ndarray]:
        """The summed loss gradient of these micro-batches by HF name, without a step (tests
        and debugging; this rank only, no all-reduce): ``kind`` "rl" (TrainBatches, norm),
        "sft" (TokenBatches, norm) or "pref" (pairs as :meth:`preference_step`, global_pairs).
        The accumulators are left zeroed."""
        self._accumulate(kind, *self._prepare(kind, micro_batches, norm))
        write_param(self._loss_acc, np.zeros(1, np.float32))
        out = {p.name: g for p, g in zip(self.params, self.optimizer.grad_arrays())}
        self.optimizer.zero_grad()
        return out

    def _optimizer_step(self, kind: str, flags, shape, inputs) -> Dict[str, float]:
        """Accumulate ``inputs``, all-reduce, clip, AdamW at the scheduled lr, count."""
        t = self.cfg.train
        lr = t.lr * lr_factor(self.optimizer_steps, warmup=t.warmup_steps,
                              total=self.total_steps, schedule=t.lr_schedule,
                              min_ratio=t.min_lr_ratio)
        hyper = self.optimizer.hyper(lr, t.grad_clip) if self.world == 1 else None
        sums, maxes, mins, tokens, fused = self._accumulate(kind, flags, shape, inputs, hyper)
        if self.world > 1:
            sums, maxes, mins, tokens = self._reduce_metrics(sums, maxes, mins, tokens)
        out = finish(sums, maxes, mins, tokens)
        if fused is not None:                        # the update already ran in the graph
            grad_norm, finite = fused
            if finite:
                self.optimizer.step += 1
        else:
            grad_norm = self.optimizer.grad_norm()
            finite = math.isfinite(grad_norm) and math.isfinite(out.get("loss", 0.0))
            if finite:
                self.optimizer.apply(lr, t.grad_clip, grad_norm)
            else:
                self.optimizer.zero_grad()
        if finite:
            self.optimizer_steps += 1
        else:
            self.skipped_steps += 1
        out.update(grad_norm=grad_norm, lr=lr, update_skipped=float(not finite),
                   response_tokens=tokens)
        return out
