"""Run in a subprocess with TRL on sys.path (see test_trl.py): one real GRPOTrainer step on the
built-in tiny model with mindrl reward functions (argv: TRL's directory, the tiny model, a work
directory[, a reward spec]); prints one @@RESULT JSON line."""

import json
import sys

sys.path.append(sys.argv[1])       # after site-packages: the venv's torch/transformers win


def main():
    import datasets.arrow_dataset as _ad
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import trl
    from mindrl.integrations.trl import reward_funcs, reward_weights

    torch.set_num_threads(1)
    # as bench/trl_compare.py: datasets' dill fingerprint of an in-memory table fails here
    _ad.generate_fingerprint = lambda _ds: __import__("secrets").token_hex(8)
    tiny, workdir = sys.argv[2], sys.argv[3]
    # slow_len = len(completion); argv[4], when given: another spec (a JSON list of entries)
    spec = sys.argv[4] if len(sys.argv) > 4 else "accuracy,pathological_rewards:slow_len:0.01"
    calls = []

    class Recorder:
        def __init__(self, fn):
            self.fn, self.__name__ = fn, fn.__name__

        def __call__(self, completions, **kwargs):
            out = self.fn(completions, **kwargs)
            calls.append({"name": self.__name__, "completions": list(completions),
                          "answer": list(kwargs.get("answer", [])), "scores": out})
            return out

    funcs = [Recorder(f) for f in reward_funcs(spec, workers=1, timeout=5.0)]
    ds = Dataset.from_list([{"prompt": f"{a} + {b} =", "answer": str(a + b)}
                            for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]])
    tok = AutoTokenizer.from_pretrained(tiny, local_files_only=True)
    args = GRPOConfig(
        output_dir=workdir, report_to="none", save_strategy="no", logging_steps=1,
        disable_tqdm=True, use_cpu=True, bf16=False, fp16=False, seed=0, max_steps=1,
        per_device_train_batch_size=4, gradient_accumulation_steps=1, num_generations=4,
        max_completion_length=16, beta=0.0, learning_rate=1e-5, reward_weights=reward_weights(spec),
        dataloader_num_workers=0, log_completions=False, model_init_kwargs={"dtype": torch.float32},
        generation_kwargs={"min_new_tokens": 16})
    logs = []

    class Logs(TrainerCallback):
        def on_log(self, args_, state, control, logs=None, **kw):
            if logs:
                logs_list.append(dict(logs))

    logs_list = logs
    trainer = GRPOTrainer(model=tiny, reward_funcs=funcs, args=args, train_dataset=ds,
                          processing_class=tok)
    trainer.add_callback(Logs())
    trainer.train()
    print("@@RESULT " + json.dumps({"trl": trl.__version__, "calls": calls, "logs": logs,
                                    "global_step": trainer.state.global_step}))


if __name__ == "__main__":
    main()
