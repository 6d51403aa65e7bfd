"""Does generation in a background thread overlap forward+backward in one process (what
``rollout.async_sampler=thread`` relies on)? Wall s of: the engine's generate alone,
forward+backward of the policy alone (8-row micro-batches over the same batch), and both at
once; mixed response lengths as in bench/trl_compare.py, one intra-op thread each.

    .venv/bin/python bench/async_overlap.py tiny 3      # size, repeats
"""
import json
import pathlib
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from mindrl.config.loader import load_config  # noqa: E402
from mindrl.trainer.rl import RLTrainer  # noqa: E402
from mindrl.types import pad_token_batch  # noqa: E402
from trl_compare import SIZES, make_prompts, wrap_generate  # noqa: E402


def main(size: str, repeats: int) -> None:
    torch.set_num_threads(1)
    S = SIZES[size]
    tmp = pathlib.Path(tempfile.mkdtemp())
    (tmp / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make_prompts(64)))
    cfg = load_config(None, [
        f"model.path={S['model']}", "model.chat_template=none", "model.dtype=float32",
        f"data.train_file={tmp / 'p.jsonl'}", "data.max_val_samples=0",
        f"rollout.n={S['n']}", f"rollout.max_new_tokens={S['tokens']}", "train.steps=100",
        f"train.prompts_per_step={S['prompts']}", "train.threads=1", "reward.num_workers=0",
        "reward.functions=[{name: 'trl_compare:bench_reward'}]", "validation.every=0",
        "logging.tensorboard=false", "logging.progress_bar=false", "checkpoint.resume=false",
        f"logging.output_dir={tmp / 'run'}", "rollout.async_ahead=1",
        "rollout.async_sampler=thread"])          # the engine: a private copy in this process
    tr = RLTrainer(cfg)
    wrap_generate(tr.engine.model, S["tokens"], True, tr.tokenizer.eos_token_id)
    pids = [tr.encode(r["problem"]) for r in tr._take_rows()]
    sp = tr.sampling(0)
    ro = tr.engine.generate(pids, sp)
    tb = pad_token_batch(ro.prompt_ids, ro.response_ids, tr.pad_id)
    ids, att = torch.tensor(tb.input_ids), torch.tensor(tb.attention_mask)
    model = tr.backend.model

    def gen():
        t = time.perf_counter()
        tr.engine.generate(pids, sp)
        return time.perf_counter() - t

    def upd():                  # forward + backward, 8 rows at a time (no optimizer step)
        t = time.perf_counter()
        for i in range(0, len(ids), 8):
            out = model(input_ids=ids[i:i + 8], attention_mask=att[i:i + 8])
            out.logits.float().logsumexp(-1).mean().backward()
        return time.perf_counter() - t

    pool = ThreadPoolExecutor(1)
    pool.submit(lambda: torch.set_num_threads(1)).result()
    res = {"gen": [], "upd": [], "both_wall": [], "both_gen": [], "both_upd": []}
    for _ in range(repeats):
        res["gen"].append(gen())
        res["upd"].append(upd())
        t = time.perf_counter()
        f = pool.submit(gen)
        u = upd()
        g = f.result()
        res["both_wall"].append(time.perf_counter() - t)
        res["both_gen"].append(g)
        res["both_upd"].append(u)
    print(size, {k: [round(x, 3) for x in v] for k, v in res.items()}, flush=True)
    tr.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "small",
         int(sys.argv[2]) if len(sys.argv) > 2 else 3)
