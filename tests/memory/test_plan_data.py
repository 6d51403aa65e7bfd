"""The memory plan of SFT and preference runs from their data's own rows: the longest prompt and
response as the trainer encodes them (measured with the model's tokenizer alone, before anything
loads) instead of the worst row data.max_prompt_len + data.max_response_len."""

import json
from pathlib import Path

import pytest

from mindrl.cli import main
from mindrl.config.loader import load_config
from mindrl.config.stages import Stage
from mindrl.memory.plan import check_fits, plan_stages
from mindrl.models.tiny import resolve_model_path

HUGE = 200_000          # data.max_response_len: its worst row needs far more than 2 GB


def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path("builtin:tiny"),
                                         local_files_only=True)


def _pairs(path, n=5):
    rows = [{"prompt": f"What is {i} + {i}?", "chosen": f"It is {2 * i}." * (i + 1),
             "rejected": f"Maybe {i}."} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def _dpo_cfg(data, *extra):
    return load_config("dpo_seed_smoke", [f"data.train_file={data}",
                                          f"data.max_response_len={HUGE}",
                                          "plan.device_memory_gb=2", *extra])


def test_preference_plan_uses_the_longest_pair_of_the_data(tmp_path):
    rows = _pairs(tmp_path / "pairs.jsonl")
    cfg = _dpo_cfg(tmp_path / "pairs.jsonl")
    # by hand: chat_template none renders the raw prompt; each response gets its end-of-turn
    tok = _tokenizer()
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    prompt = max(len(enc(r["prompt"])) for r in rows)
    response = max(max(len(enc(r["chosen"])), len(enc(r["rejected"]))) + 1 for r in rows)
    assert response > 10 and prompt > 3
    (plan,) = check_fits([Stage(1, "", "dpo", cfg, 1)])     # fits: no refusal
    assert (plan.setup.prompt_len, plan.setup.response_len) == (prompt, response)
    assert plan.fits() and plan.peak() < 2e9
    assert plan.setup.lengths == (f"prompt {prompt} + response {response} tokens, the longest "
                                  f"of all 5 rows of the data, under data.max_response_len="
                                  f"{HUGE}")


def test_plan_without_the_data_plans_the_worst_row_and_says_why(tmp_path):
    cfg = _dpo_cfg(tmp_path / "absent.jsonl")
    (plan,) = plan_stages([Stage(1, "", "dpo", cfg, 1)])
    assert (plan.setup.prompt_len, plan.setup.response_len) == (64, HUGE)
    assert not plan.fits()
    assert plan.setup.lengths.startswith(f"prompt 64 (data.max_prompt_len) + response {HUGE} "
                                         "(data.max_response_len) tokens, the worst row: "
                                         "data.train_file=")
    assert "absent.jsonl" in plan.setup.lengths


def test_mindrl_plan_prints_the_length_source(tmp_path, capsys):
    _pairs(tmp_path / "pairs.jsonl", n=80)
    assert main(["plan", "dpo_seed_smoke", f"data.train_file={tmp_path / 'pairs.jsonl'}",
                 f"data.max_response_len={HUGE}", "plan.device_memory_gb=2",
                 "data.preflight_rows=16"]) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("  lengths: ")]
    # the first 16 pairs: the longest chosen is pair 15's, 16 repeats of "It is 30."
    assert len(lines) == 1 and lines[0].endswith(
        "the longest of the first 16 of 80 rows (more: data.preflight_rows), under "
        f"data.max_response_len={HUGE}"), lines
    assert "peak per device" in out and ": fits" in out


def test_sft_plan_measures_its_rows_and_a_long_row_still_refuses_before_loading(
        tmp_path, capsys):
    tok = _tokenizer()
    short = [{"problem": "1 + 1 =", "answer": "2"}, {"problem": "2 + 2 =", "answer": "4 " * 9}]
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in short), encoding="utf-8")
    over = [f"data.train_file={data}", "data.response_field=answer",
            f"data.max_response_len={HUGE}", "plan.device_memory_gb=2"]
    cfg = load_config("sft_tiny_demo", over)
    (plan,) = check_fits([Stage(1, "", "sft", cfg, 1)])
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    assert plan.setup.response_len == len(enc("4 " * 9)) + 1
    assert plan.setup.prompt_len == len(enc("2 + 2 ="))
    # one row as long as the limit: the plan exceeds 2 GB and `mindrl sft` stops before the
    # model loads or the run folder is written
    data.write_text(json.dumps({"problem": "1 + 1 =", "answer": "7 " * HUGE}) + "\n",
                    encoding="utf-8")
    out = tmp_path / "run"
    capsys.readouterr()
    rc = main(["sft", "sft_tiny_demo", *over, f"logging.output_dir={out}"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and "memory plan: the run needs" in err[0], err
    assert not out.exists()


# ---------------------------------------------------------------------- model-based rewards
def _judge_params():
    """(parameters, layers, kv heads x head_dim, vocab) of builtin:tiny-judge, read from its
    safetensors and config.json (not from the plan's shape arithmetic)."""
    from safetensors import safe_open

    d = resolve_model_path("builtin:tiny-judge")
    with safe_open(str(Path(d) / "model.safetensors"), "np") as f:
        n = sum(f.get_tensor(k).size for k in f.keys())
    c = json.loads((Path(d) / "config.json").read_text())
    return n, c["num_hidden_layers"], c["num_key_value_heads"] * c["head_dim"], c["vocab_size"]


def test_an_in_process_judge_is_counted_by_hand():
    n, layers, kv, vocab = _judge_params()
    (plan,) = plan_stages([Stage(1, "", "train", load_config("grpo_judge_smoke"), 1)])
    parts = {p.name: p for p in plan.parts}
    assert parts["judge weights"].bytes == 4 * n and parts["judge weights"].phase == "held"
    # its defaults: 16 prompts of 2048 tokens + the recipe's 4 new tokens, float32 keys and
    # values of each layer, and two float32 copies of 16 rows of logits
    kv_cache = 16 * (2048 + 4) * 2 * layers * kv * 4
    assert parts["judge KV cache + logits"].bytes == kv_cache + 2 * 16 * vocab * 4
    assert parts["judge KV cache + logits"].phase == "reward" and plan.peak_phase() == "reward"
    # the same judge on the host of a CUDA run: a host part, nothing on the device
    (cuda,) = plan_stages([Stage(1, "", "train", load_config("grpo_judge_smoke",
                                                             ["device=cuda"]), 1)])
    assert not [p for p in cuda.parts if "judge" in p.name]
    assert [p.bytes for p in cuda.host_parts if p.name == "judge on the host"] == [
        4 * n + kv_cache + 2 * 16 * vocab * 4]


def test_a_vllm_judge_takes_its_share_and_a_remote_one_is_not_counted():
    def judge(**params):
        fn = {"name": "judge", "params": {"model": "builtin:tiny-judge", **params}}
        cfg = load_config("grpo_judge_smoke", ["device=cuda", "plan.device_memory_gb=80",
                                               f"reward.functions=[{json.dumps(fn)}]"])
        return plan_stages([Stage(1, "", "train", cfg, 1)])[0]

    plan = judge(engine="vllm", gpu_memory_utilization=0.25)
    assert [p.bytes for p in plan.parts if p.name == "judge (vLLM share)"] == [0.25 * 80e9]
    remote = judge(placement="actor")
    assert not [p for p in remote.parts if "judge" in p.name] and not remote.host_parts
    assert ("reward judge (builtin:tiny-judge) runs in a Ray actor of its own "
            "(params.placement=actor): not counted here") in remote.notes
    assert remote.peak() == plan.peak() - 0.25 * 80e9


def test_gradient_accumulation_adds_one_embedding_gradient_on_torch():
    from mindrl.memory.plan import GB, Setup, plan_memory

    m = _small()

    def temporaries(**kw):
        kw = {"backend": "torch", **kw}
        s = Setup(device="cpu", rows=2, prompt_len=8, response_len=8, engine="none",
                  device_bytes=80 * GB, **kw)
        return [p.bytes for p in plan_memory(m, s).parts
                if p.name == "embedding gradient temporaries"][0]

    # tied: the embedding's dense gradient and its sum with the head's (2 x 1000 x 64 x 4 B);
    # torch makes a tied embedding's backward sparse (one copy left, as measured);
    # accumulating, the new one beside the gradient accumulated so far: one more
    assert temporaries() == 1 * 1000 * 64 * 4
    assert temporaries(accumulation=True) == 2 * 1000 * 64 * 4
    assert temporaries(fsdp=True) == 2 * 1000 * 64 * 4
    assert temporaries(accumulation=True, backend="mindspore") == 2 * 1000 * 64 * 4


def test_torch_fused_adamw_plans_no_step_temporaries():
    # torch's fused AdamW (plain tensors on CPU / CUDA) updates in place; FSDP's DTensor shards
    # keep the foreach step, one moment copy of the shard
    from mindrl.memory.plan import GB, Setup, plan_memory

    m = _small()

    def temp(**kw):
        s = Setup(rows=2, prompt_len=8, response_len=8, engine="none", device_bytes=80 * GB,
                  **{"backend": "torch", "device": "cpu", **kw})
        return [p.bytes for p in plan_memory(m, s).parts
                if p.name == "optimizer step temporaries"][0]

    assert temp() == 0 and temp(device="cuda") == 0
    assert temp(fsdp=True, world=2, device="cuda") > 0


def _small():
    from mindrl.memory.shapes import shape_from_config

    return shape_from_config(dict(model_type="qwen2", hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, num_key_value_heads=1,
                                  intermediate_size=256, vocab_size=1000,
                                  tie_word_embeddings=True), "small")


def test_the_plans_automatic_head_chunk_is_the_torch_backends():
    from mindrl.backends.torch.chunked_head import chunk_tokens
    from mindrl.memory.plan import auto_chunk

    # by hand: 512 MiB over 8 float32 (chunk, V) tensors: 2**29 // (32 x 151,936) = 110
    assert auto_chunk(151936) == 110
    assert auto_chunk(10 ** 7) == 16                  # the backend's smallest chunk
    for vocab in (1000, 32000, 151936, 152064, 10 ** 7):
        assert auto_chunk(vocab) == chunk_tokens(-1, vocab), vocab


def test_a_chunked_head_backward_holds_three_weight_gradients_unless_fused():
    from mindrl.memory.plan import GB, Setup, plan_memory

    def head_bwd(chunk, backend="torch", copies=None, device="cpu", part=None):
        s = Setup(backend=backend, device=device, rows=2, prompt_len=8, response_len=8,
                  engine="none", device_bytes=80 * GB, head_chunk=chunk, head_copies=copies)
        return [p.bytes for p in plan_memory(_small(), s).parts
                if p.name == (part or "log-prob head in the backward")] + [None]

    # 2 rows x (8 + 1) = 18 head tokens; V 1000, h 64, float32
    kept = "head's weight gradient (kept)"
    assert head_bwd(0)[0] == 18 * 3 * 4 * 1000 + 1000 * 64 * 4       # whole: 1 weight gradient
    assert head_bwd(18) == head_bwd(0)                                 # one chunk is the whole
    assert head_bwd(0, part=kept) == [None]
    # 5 chunks of 4; the 16 scored tokens' logits are far within the torch head's budget:
    # kept, and all but one chunk's still held in the backward. The plain loss's fused path
    # keeps 1 float32 copy of V per token, turns it into its gradient a 2 MiB float32 block of
    # rows at a time and writes the weight gradient once (one GEMM): on CPU into a buffer held
    # from step to step, on an accelerator a fresh one in the backward
    blk = 2 * 2 ** 20
    assert head_bwd(4)[0] == 16 * 1 * 4 * 1000 + blk
    assert head_bwd(4, part=kept)[0] == 1000 * 64 * 4
    assert head_bwd(4, device="cuda")[0] == 16 * 1 * 4 * 1000 + blk + 1000 * 64 * 4
    assert head_bwd(4, device="cuda", part=kept) == [None]
    # a differentiable entropy (8 copies, kept): the chunks' gradients summed, 3 at once
    assert head_bwd(4, copies=8)[0] == \
        4 * 3 * 4 * 1000 + 3 * 1000 * 64 * 4 + (16 - 4) * 8 * 4 * 1000
    assert head_bwd(4, copies=8, part=kept) == [None]
    # MindSpore keeps the chunks' float32 logits (1 copy per token, whatever the loss) and
    # sums its chunks' weight gradients into one buffer: one weight gradient
    for copies in (None, 8):
        assert head_bwd(4, "mindspore", copies)[0] == \
            4 * 3 * 4 * 1000 + 1000 * 64 * 4 + (16 - 4) * 1 * 4 * 1000


def test_float32_masters_hold_only_float32_gradients_between_backwards_and_in_the_step():
    from mindrl.memory.plan import GB, Setup, plan_memory

    m = _small()
    n = m.params()

    def grads(device="cpu", **kw):
        s = Setup(backend="torch", device=device, rows=2, prompt_len=8, response_len=8,
                  engine="none", device_bytes=80 * GB, accumulation=True, **kw)
        return {p.name: (p.bytes, p.phase) for p in plan_memory(m, s).parts
                if "gradients" in p.name and "temporaries" not in p.name}

    # bf16 with masters: bf16 + float32 at the backward's end; float32 alone otherwise (on CPU
    # the float32 ones are kept from step to step: held for the whole run, so the backward's
    # end adds the bf16 ones alone: counting 4 N there too planned bf16 at 0.84x its peak)
    assert grads(dtype_bytes=2, master_weights=True) == {
        "gradients": (2 * n, "bwd-end"),
        "float32 gradients (accumulated, stepped)": (4 * n, "held")}
    assert grads("cuda", dtype_bytes=2, master_weights=True) == {
        "gradients": ((2 + 4) * n, "bwd-end"),
        "float32 gradients (accumulated, stepped)": (4 * n, "fwd|bwd|step")}
    # float32: the gradients are the accumulated ones, in every phase
    assert grads(dtype_bytes=4) == {"gradients": (4 * n, "fwd|bwd|bwd-end|step")}


def test_sft_and_preference_accumulate_only_past_one_micro_batch_per_rank():
    from mindrl.memory.plan import model_shape, setup_from_config

    def accumulates(job, recipe, *over):
        cfg = load_config(recipe, list(over))
        return setup_from_config(cfg, job, model_shape(cfg)).accumulation

    one = ("train.prompts_per_step=4", "train.micro_batch_size=4")
    two = ("train.prompts_per_step=4", "train.micro_batch_size=2")
    assert not accumulates("sft", "sft_tiny_demo", *one)
    assert accumulates("sft", "sft_tiny_demo", *two)
    # 8 rows over 2 ranks: 4 a rank, one micro-batch of 4
    assert not accumulates("sft", "sft_tiny_demo", "train.prompts_per_step=8",
                           "train.micro_batch_size=4", "distributed.nproc=2")
    assert not accumulates("dpo", "dpo_seed_smoke", *one)
    assert accumulates("dpo", "dpo_seed_smoke", *two)


# ---------------------------------------------------------------------- one encode per row
@pytest.mark.parametrize("job", ["sft", "simpo"])
def test_the_plan_and_the_trainers_checks_encode_each_preflight_row_once(
        job, tmp_path, monkeypatch, caplog):
    # The plan (check_fits) measures the first data.preflight_rows rows; the trainer's data
    # preflight (prompt lengths) and its check before the first step (response lengths) then
    # take those numbers: the real tokenizer, wrapped to count, encodes each prompt and each
    # response once in all, and the trainer's line holds the hand-counted longest response.
    import logging
    from collections import Counter

    from transformers import PreTrainedTokenizerBase

    from mindrl.data import preflight

    counts = Counter()

    def counting(cls):
        real = cls.encode

        def encode(self, text, *args, **kwargs):
            counts[text] += 1
            return real(self, text, *args, **kwargs)
        monkeypatch.setattr(cls, "encode", encode)

    counting(PreTrainedTokenizerBase)
    counting(preflight._FastTokenizer)
    data = tmp_path / "rows.jsonl"
    if job == "sft":
        rows = [{"prompt": f"{i} + {i} =", "completion": f"{2 * i} " * (i + 1)}
                for i in range(5)]
        responses = [[r["completion"]] for r in rows]
        from mindrl.trainer.sft import SFTTrainer as cls
    else:
        rows = [{"prompt": f"What is {i} + {i}?", "chosen": f"It is {2 * i}." * (i + 1),
                 "rejected": f"Maybe {i}."} for i in range(5)]
        responses = [[r["chosen"], r["rejected"]] for r in rows]
        from mindrl.trainer.preference import PreferenceTrainer as cls
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    over = ["model.path=builtin:tiny", "model.chat_template=none", f"data.train_file={data}",
            "train.steps=1", "train.prompts_per_step=4", "train.micro_batch_size=2",
            "reward.num_workers=0", "reward.functions=[{name: arithmetic}]",
            "logging.tensorboard=false", "logging.progress_bar=false", "logging.plot=false",
            f"logging.output_dir={tmp_path / 'run'}", "data.max_response_len=30"]
    if job == "simpo":
        over.append("preference.loss=simpo")
    cfg = load_config(None, over)
    (plan,) = check_fits([Stage(1, "", job, cfg, 1)])
    with caplog.at_level(logging.INFO):
        trainer = cls(cfg)
    trainer.close()
    texts = [r["prompt"] for r in rows] + [t for pair in responses for t in pair]
    assert {t: counts[t] for t in texts} == {t: 1 for t in texts}
    tok = _tokenizer()
    longest = max(len(tok.encode(t, add_special_tokens=False)) + 1
                  for pair in responses for t in pair)
    assert plan.setup.response_len == longest
    what = "rows" if job == "sft" else "pairs"
    assert (f"response lengths: all of the first 5 {what} fit data.max_response_len=30 "
            f"(longest {longest} tokens)") in caplog.messages
