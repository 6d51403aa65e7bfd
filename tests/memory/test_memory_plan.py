"""The per-device memory plan (mindrl.memory): parameter counts from config.json shapes, the
plan's arithmetic against hand-computed bytes, `mindrl plan` on every shipped recipe, and
`mindrl train` refusing before it loads anything when the plan exceeds the device."""

from pathlib import Path

import pytest

from mindrl.cli import main
from mindrl.config.loader import REPO_CONFIGS, load_config
from mindrl.config.stages import Stage, load_stages
from mindrl.memory.plan import GB, Setup, check_fits, plan_memory, plan_stages
from mindrl.memory.shapes import KNOWN_MODELS, known_shape, shape_from_config


# Parameter counts of transformers' models built on the meta device from the same config.json
# fields (Qwen2ForCausalLM / Qwen3ForCausalLM, transformers 5.19), and the Hub's model cards.
@pytest.mark.parametrize("name,params", [
    ("Qwen2.5-0.5B", 494_032_768),          # transformers, meta device
    ("Qwen3-0.6B", 596_049_920),            # transformers, meta device
    ("Qwen2.5-7B-Instruct", 7_615_616_512),  # model card: 7.61B
    ("Qwen2.5-1.5B", 1_543_714_304),         # model card: 1.54B
    ("DeepSeek-R1-Distill-Qwen-32B", 32_763_876_352),   # model card: 32.8B
])
def test_parameter_counts_from_config_shapes(name, params):
    assert known_shape("/models/" + name).params() == params


def test_moe_counts_experts_per_layer():
    # Qwen3-30B-A3B: 48 layers of 128 experts x 3 x 2048 x 768 plus a 2048 x 128 router;
    # attention 2048 x 4096 x 2 + 2048 x 512 x 2 + q/k norms 2 x 128; norms 2 x 2048; an
    # untied 151936 x 2048 embedding and head and the final norm
    layer = 128 * 3 * 2048 * 768 + 2048 * 128 + 2 * 2048 * 4096 + 2 * 2048 * 512 + 256 + 4096
    want = 48 * layer + 2 * 151936 * 2048 + 2048
    assert known_shape("Qwen3-30B-A3B-Base").params() == want == 30_532_122_624


def small_shape():
    return shape_from_config(dict(model_type="qwen2", hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=2, num_key_value_heads=1,
                                  intermediate_size=256, vocab_size=1000,
                                  tie_word_embeddings=True), "small")


def test_held_parts_and_peak_by_hand():
    m = small_shape()
    # embedding 64000 + 2 layers x (q 64x64+64, k,v 64x32+32 each, o 64x64, mlp 3x64x256,
    # norms 128) + final norm 64
    n = 64000 + 2 * (4160 + 2 * 2080 + 4096 + 49152 + 128) + 64
    assert m.params() == n
    s = Setup(backend="torch", device="cuda", dtype_bytes=2, master_weights=True, rows=2,
              prompt_len=8, response_len=8, engine="none", device_bytes=80 * GB)
    plan = plan_memory(m, s)
    parts = {p.name: p.bytes for p in plan.parts}
    assert parts["weights (bf16/fp16)"] == 2 * n
    assert parts["master weights (float32)"] == 4 * n
    assert parts["optimizer state (AdamW moments)"] == 8 * n
    assert parts["gradients"] == (2 + 4) * n            # bf16 backward + float32 accumulation
    # the head: 2 rows x (8 + 1) positions x 5 float32 copies of 1000 logits
    assert parts["log-prob head (18 tokens x 1000)"] == 18 * 5 * 4 * 1000
    held = sum(p.bytes for p in plan.parts if p.phase == "held")
    working = {ph: sum(p.bytes for p in plan.parts if ph in p.phase.split("|"))
               for ph in ("fwd", "bwd", "bwd-end", "step")}
    assert plan.peak() == held + max(working.values())
    # float32: no masters, moments in float32 = 8 B, gradients 4 B
    s32 = plan_memory(m, Setup(dtype_bytes=4, master_weights=True, engine="none",
                               device_bytes=GB))
    p32 = {p.name: p.bytes for p in s32.parts}
    assert "master weights (float32)" not in p32 and p32["gradients"] == 4 * n


def test_fsdp_and_optimizer_sharding_divide_the_states():
    m = known_shape("Qwen2.5-7B")
    base = dict(backend="torch", device="cuda", dtype_bytes=2, master_weights=True,
                engine="none", device_bytes=80 * GB, rows=1, prompt_len=16, response_len=16)
    one = {p.name: p.bytes for p in plan_memory(m, Setup(**base)).parts}
    eight = {p.name: p.bytes for p in plan_memory(m, Setup(**base, world=8, fsdp=True)).parts}
    for name in ("weights (bf16/fp16)", "master weights (float32)",
                 "optimizer state (AdamW moments)", "gradients"):
        assert eight[name] == pytest.approx(one[name] / 8)
    ms = dict(base, backend="mindspore", device="ascend", world=8)
    rep = {p.name: p.bytes for p in plan_memory(m, Setup(**ms)).parts}
    shd = {p.name: p.bytes for p in plan_memory(m, Setup(**ms, optimizer_shard=8)).parts}
    assert shd["optimizer state (AdamW moments)"] == pytest.approx(
        rep["optimizer state (AdamW moments)"] / 8)
    assert shd["master weights (float32)"] == pytest.approx(rep["master weights (float32)"] / 8)


def test_recompute_and_head_chunking_shrink_their_parts():
    m = known_shape("Qwen2.5-1.5B")
    base = dict(device="cuda", dtype_bytes=2, rows=4, prompt_len=1024, response_len=8192,
                engine="none", device_bytes=80 * GB)
    full = {p.name: p.bytes for p in plan_memory(m, Setup(**base)).parts}
    rec = {p.name: p.bytes for p in plan_memory(m, Setup(**base, recompute=True)).parts}
    assert rec["activations (recompute)"] < full["activations"] / 5
    chunk = plan_memory(m, Setup(**base, head_chunk=256))
    head = [p for p in chunk.parts if p.name.startswith("log-prob head (")][0]
    assert head.name == "log-prob head (256 tokens x 151936)"
    assert head.bytes == 256 * 5 * 4 * 151936


def test_plan_from_recipe_resolves_stages_and_run_folders():
    # a later stage's model is the previous stage's checkpoint: same shape as the first
    plans = plan_stages(load_stages("deepscaler_1.5b"))
    assert [p.shape.params() for p in plans] == [known_shape(
        "DeepSeek-R1-Distill-Qwen-1.5B").params()] * 3
    # a path inside another recipe's run folder: that recipe's model (builtin:mini)
    (plan,) = plan_stages(load_stages("distill_tiny_demo"))
    assert plan.shape.name == "builtin:mini"
    assert plan.setup.teacher is not None and plan.setup.teacher.name == "builtin:mini"


def test_mindrl_plan_prints_every_shipped_recipe(capsys):
    # the command once (argparse and all), then the same library call for every recipe
    assert main(["plan", "deepscaler_1.5b", "plan.device_memory_gb=141"]) == 0
    out = capsys.readouterr().out
    assert out.count("peak per device") == 3 and "of 141 GB (cuda)" in out
    assert "stage 2/3 'ctx16k'" in out and "log-prob head (65540 tokens x 151936)" not in out
    for recipe in sorted(REPO_CONFIGS.glob("*.yaml")):
        stages = load_stages(recipe.stem)
        plans = plan_stages(stages, recipe=recipe.stem)
        assert len(plans) == len(stages), recipe.stem
        for plan in plans:
            text = plan.table()
            assert "peak per device" in text and "optimizer state" in text, recipe.stem
            assert plan.peak() > plan.phase_total("held") > 0, recipe.stem


def _header(path: Path) -> str:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def test_accelerator_recipes_fit_their_devices_or_say_why():
    for recipe in sorted(REPO_CONFIGS.glob("*.yaml")):
        stages = load_stages(recipe.stem)
        if stages[0].cfg.device == "cpu":
            continue
        bad = [p.label for p in plan_stages(stages, recipe=recipe.stem) if not p.fits()]
        if bad:
            assert "memory plan (`mindrl plan" in _header(recipe).lower(), (
                f"{recipe.stem}: {bad} exceed the device by `mindrl plan` and the header "
                "does not say why")


def test_train_refuses_before_loading_when_the_plan_exceeds_the_device(tmp_path, capsys):
    out = tmp_path / "run"
    capsys.readouterr()
    rc = main(["train", "grpo_tiny_demo", "plan.device_memory_gb=0.05",
               f"logging.output_dir={out}"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1, err
    line = err[0]
    assert "memory plan" in line and "more than the 0.1 GB of cpu" in line
    # the largest part and the keys that shrink it, and the key that overrides
    assert "largest part: activations" in line
    assert "model.gradient_checkpointing=true" in line and "plan.check=false" in line
    assert not out.exists()                              # nothing ran, nothing was written


def test_plan_check_false_lets_it_start():
    cfg = load_config("grpo_tiny_demo", ["plan.device_memory_gb=0.05", "plan.check=false"])
    assert check_fits([Stage(1, "", "train", cfg, 1)]) == []
    cfg = load_config("grpo_tiny_demo", ["plan.device_memory_gb=0.05"])
    with pytest.raises(Exception, match="memory plan"):
        check_fits([Stage(1, "", "train", cfg, 1)])


def test_known_models_table_reads_back():
    for name, cfg in KNOWN_MODELS.items():
        shape = shape_from_config(cfg, name)
        assert shape.params() > 0 and shape.hidden % shape.heads == 0 or shape.head_dim


def test_mindformers_layout_and_host_weight_sync_by_hand():
    (plan,) = plan_stages(load_stages("grpo_math_r1_distill_qwen_32b_ascend"))
    m = plan.shape
    assert (plan.setup.tp, plan.setup.pp, plan.setup.world) == (8, 4, 32)
    # the worst stage: 16 of 64 layers plus the untied embedding (the head is as large), / tp 8
    per_layer = m.decoder_params() / 64
    weights = [p.bytes for p in plan.parts if p.name == "weights (float32)"][0]
    assert weights == pytest.approx(4 * (16 * per_layer + 152064 * 5120 + 5120) / 8)
    # each of the node's 8 processes merges the whole model in float32 for vLLM
    (host,) = plan.host_parts
    assert host.bytes == 4 * m.params() * 8 == pytest.approx(1048.4e9, rel=1e-3)
    # 64 rollouts per step over data parallel 1 x 64 micro-batches: one 17k-token row each
    assert plan.setup.rows == 1 and plan.setup.prompt_len + plan.setup.response_len == 17408
    assert plan.fits() and 40 * GB < plan.peak() < 64 * GB


def test_a_vllm_share_smaller_than_the_weights_does_not_fit():
    m = known_shape("Qwen2.5-7B")
    s = Setup(device="cuda", dtype_bytes=2, engine="vllm", engine_share=0.05,
              device_bytes=200 * GB, rows=1, prompt_len=8, response_len=8)
    plan = plan_memory(m, s)
    assert plan.peak() < 200 * GB and not plan.fits()     # the totals fit, vLLM cannot start
    assert "rollout.gpu_memory_utilization=0.05" in plan.refusal()
    # 15.23 GB of bf16 weights in a 0.12 share (24 GB) leave 8.77 GB for the KV cache: 2 x 28
    # layers x 512 x 2 B = 57,344 B a token, 16 tokens a sequence -> 9557 sequences
    ok = plan_memory(m, Setup(**{**s.__dict__, "engine_share": 0.12}))
    assert ok.fits() and "holds 9557 sequences of 16 tokens" in ok.notes[0]


def test_launch_refuses_before_starting_workers(tmp_path, capsys):
    capsys.readouterr()
    rc = main(["launch", "grpo_tiny_demo", "plan.device_memory_gb=0.05", "distributed.nproc=2",
               f"logging.output_dir={tmp_path / 'run'}"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and "memory plan" in err[0], err
    assert not (tmp_path / "run").exists()


def test_shard_layout_places_every_value_and_bounds_the_gather_by_hand():
    """11 values in parameters of 5, 2 and 4 over 2 ranks (slices of 6, the last padded), chunks
    of 2: bucket 0 carries values 0, 1 | 6, 7; bucket 1 2, 3 | 8, 9; bucket 2 4, 5 | 10, pad.
    Every parameter is complete after bucket 2: pieces of 4 values are cut from bucket 0, 8 after
    bucket 1, all 11 at bucket 2, where the bucket (4) and the 5-value parameter concatenated
    from its pieces exist too: at most 4 + 11 + 5 values."""
    import numpy as np

    from mindrl.backends.shard_layout import gather_peak_values, gather_schedule

    offsets, s, chunks, done = gather_schedule([5, 2, 4], 2, 2 * 4 * 2)
    assert (offsets, s, chunks) == ([0, 5, 7, 11], 6, [(0, 2), (2, 4), (4, 6)])
    assert done == ((), (), ((0, ((0, 0, 2), (1, 0, 2), (2, 0, 1))),
                             (1, ((2, 1, 2), (0, 2, 3))),
                             (2, ((0, 3, 4), (1, 2, 4), (2, 2, 3)))))
    assert gather_peak_values([5, 2, 4], 2, 16) == 4 + 11 + 5
    # any layout: the gathered buckets put every value back in its parameter
    rng = np.random.default_rng(0)
    for _ in range(20):
        sizes = rng.integers(1, 40, rng.integers(1, 8)).tolist()
        world, c = int(rng.integers(2, 5)), int(rng.integers(1, 9))
        offsets, s, chunks, done = gather_schedule(sizes, world, 4 * world * c)
        flat = np.zeros(s * world)
        flat[:offsets[-1]] = np.arange(offsets[-1])
        got = [np.concatenate([flat[r * s + a:r * s + b] for r in range(world)])
               for a, b in chunks]
        seen = []
        for params in done:
            for i, ps in params:
                seen.append(i)
                np.testing.assert_array_equal(np.concatenate([got[k][u:w] for k, u, w in ps]),
                                              np.arange(offsets[i], offsets[i + 1]))
        assert sorted(seen) == list(range(len(sizes)))


def test_mindspore_sharded_plan_counts_the_gradient_slice_and_bucket_gathers():
    from mindrl.memory.plan import tensor_sizes
    from mindrl.backends.shard_layout import BUCKET_BYTES, gather_peak_values

    m = known_shape("Qwen2.5-7B")
    N = m.params()
    assert sum(tensor_sizes(m)) == N and len(tensor_sizes(m)) == 1 + 28 * 10 + 2
    base = dict(backend="mindspore", device="ascend", dtype_bytes=2, master_weights=True,
                world=8, engine="none", device_bytes=64 * GB, rows=1, prompt_len=16,
                response_len=16, accumulation=True)
    rep = {p.name: p for p in plan_memory(m, Setup(**base)).parts}
    shd = {p.name: p for p in plan_memory(m, Setup(**base, optimizer_shard=8)).parts}
    assert rep["gradient accumulator (float32)"].bytes == 4 * N
    assert "train.shard_optimizer=true" in rep["gradient accumulator (float32)"].shrink
    assert shd["gradient accumulator (float32)"].bytes == 4 * N / 8
    # reduced per micro-batch: the bf16 gradients and two float32 buckets, at the backward's end
    assert shd["gradients"].bytes == 2 * N + 2 * BUCKET_BYTES
    assert shd["gradients"].phase == "bwd-end" and "fwd" in rep["gradients"].phase
    gathers = shd["bucket gathers of the new weights"]
    assert gathers.bytes == 2 * gather_peak_values(tensor_sizes(m), 8, BUCKET_BYTES)
    # far less than the whole bf16 vector (15.2 GB), more than embedding + head (2.2 GB)
    assert 2 * 2 * m.embedding_params() < gathers.bytes < 2 * N / 4
    assert "bucket gathers of the new weights" not in rep
    # the PPO critic: bf16 weights, masters and moments sliced as the policy's
    crit = {p.name: p.bytes for p in plan_memory(m, Setup(**base, optimizer_shard=8,
                                                          critic=True)).parts}
    assert crit["critic (weights, masters, moments)"] == (N + 3584) * (2 + (4 + 8) / 8)


QWEN7B_MS = ["backend=mindspore", "rollout.engine=native", "algorithm.kl.coef=0",
             "train.micro_batch_size=1", "model.gradient_checkpointing=true"]


def test_qwen25_7b_mindspore_on_8x64gb_fits_sharded_and_the_plan_names_the_key(capsys):
    from mindrl.errors import ConfigError
    from mindrl.backends.shard_layout import BUCKET_BYTES

    # the MindSpore recipe is the mindformers one with these overrides and the sharded optimizer
    recipe = "grpo_gsm8k_qwen25_7b_ascend_mindspore"
    (via_overrides,) = plan_stages(load_stages("grpo_gsm8k_qwen25_7b_ascend", tuple(
        QWEN7B_MS + ["train.shard_optimizer=true"])))
    (shipped,) = plan_stages(load_stages(recipe))
    assert [(q.name, q.bytes, q.phase) for q in shipped.parts] == \
        [(q.name, q.bytes, q.phase) for q in via_overrides.parts]
    stages = load_stages(recipe, ("train.shard_optimizer=false",))
    (plan,) = plan_stages(stages)
    assert plan.setup.world == 8 and plan.setup.device_bytes == 64 * GB and not plan.fits()
    assert 45 * GB < plan.sharded_peak < 64 * GB
    with pytest.raises(ConfigError) as err:
        check_fits(stages)
    line = str(err.value)
    assert "\n" not in line and "set train.shard_optimizer=true" in line
    assert f"it needs {plan.sharded_peak / GB:.1f} GB" in line

    (sharded,) = plan_stages(load_stages(recipe))
    assert sharded.fits() and check_fits(load_stages(recipe))
    # by hand: held = bf16 weights + (float32 masters, moments, gradient slice) / 8 + the
    # chunked head's bf16 (V, h) gradient buffer + runtime; the peak is at the backward's end:
    # bf16 gradients, two float32 buckets, the embedding's bf16 gradient temporary
    N, V, h = plan.shape.params(), plan.shape.vocab, plan.shape.hidden
    held = 2 * N + (4 + 8 + 4) * N / 8 + V * h * 2 + 3 * GB
    assert sharded.peak_phase() == "bwd-end"
    assert sharded.peak() == pytest.approx(held + 2 * N + 2 * BUCKET_BYTES + V * h * 2)
    assert sharded.peak() == pytest.approx(plan.sharded_peak)
    capsys.readouterr()
    assert main(["plan", recipe]) == 0
    out = capsys.readouterr().out
    assert f"{sharded.peak() / GB:.2f}  (held + bwd-end) of 64 GB (ascend): fits" in out
    rows = {line[:40].strip(): line[40:].split() for line in out.splitlines()}
    assert rows["gradient accumulator (float32)"][:2] == ["3.81", "held"]
    assert rows["bucket gathers of the new weights"][1] == "step"
    # the backends page's table is these plans' numbers
    page = (Path(__file__).resolve().parents[2] / "docs" / "backends.md").read_text()
    gathers = rows["bucket gathers of the new weights"][0]
    assert f"| bucket gathers of the new weights (step) | - | {gathers} |" in page
    assert (f"| peak per device | {plan.peak() / GB:.2f} (does not fit) | "
            f"{sharded.peak() / GB:.2f} (fits) |") in page


def test_mindspore_plans_its_chunked_head_for_rl_sft_and_preference():
    # backend=mindspore chunks the head of the RL, SFT and preference updates (automatic: 44
    # tokens at V = 151,936, its measured ~20 (token, V) float32 copies per chunk in 512 MiB)
    from mindrl.memory.plan import setup_from_config

    m = known_shape("Qwen2.5-0.5B")
    over = ["backend=mindspore", "data.max_prompt_len=64", "rollout.max_new_tokens=4096",
            "train.micro_batch_size=2"]
    rl = setup_from_config(load_config(None, over), "train", m)
    sft = setup_from_config(load_config(None, over), "sft", m)
    dpo = setup_from_config(load_config(None, over), "dpo", m)
    off = setup_from_config(load_config(None, over + ["train.logprob_chunk_tokens=0"]),
                            "train", m)
    assert (rl.head_chunk, sft.head_chunk, dpo.head_chunk, off.head_chunk) == (44, 44, 44, 0)
    set_ = setup_from_config(load_config(None, over + ["train.logprob_chunk_tokens=300"]),
                             "train", m)
    assert set_.head_chunk == 300
    heads = [p.name for p in plan_memory(m, rl).parts if p.name.startswith("log-prob head (")]
    assert heads == ["log-prob head (44 tokens x 151936)"]


def test_torch_plan_keeps_the_chunks_log_softmax_by_the_heads_own_count():
    # 1 row x 300 response tokens in chunks of 32 at V = 151,936: the RL update's plain loss
    # runs the fused log-prob path, which keeps the logits in the model's dtype: 1 float32 copy
    # of V per token in float32 (300 x 151,936 x 4 = 182 MB), half of one in bfloat16 (91 MB),
    # both within half of 512 MiB (2 copies, 365 MB, would not be); a differentiable entropy or
    # the rollout's truncation keep 8 (1.46 GB: recomputed instead). Kept, the fused path's
    # float32 work runs in blocks of rows, and the head's weight
    # gradient is one GEMM's, written on CPU into a (V, H) buffer held from step to step (not
    # in the backward's working set; the tied embedding's rows added into it in place: no
    # embedding temporaries, and the gradients' part less that buffer); recomputed, the
    # chunks' sum (3 copies in the backward).
    from mindrl.memory.plan import setup_from_config

    m = known_shape("Qwen2.5-0.5B")
    over = ["data.max_prompt_len=16", "rollout.max_new_tokens=300", "train.micro_batch_size=1",
            "train.logprob_chunk_tokens=32", "plan.device_memory_gb=100"]
    heads = {}
    for extra in ([], ["model.dtype=bfloat16"], ["algorithm.entropy_coef=0.01"],
                  ["rollout.top_k=20"]):
        s = setup_from_config(load_config(None, over + extra), "train", m)
        parts = plan_memory(m, s).parts
        head = [p for p in parts if p.name.startswith("log-prob head (")][0]
        bwd = [p for p in parts if p.name == "log-prob head in the backward"][0]
        by = {p.name: p.bytes for p in parts}
        heads[tuple(extra)] = (s.head_copies, head.name, head.bytes, bwd.bytes,
                               by.get("head's weight gradient (kept)"),
                               by.get("embedding gradient temporaries"), by["gradients"])
    V, h, c = 151_936, m.hidden, 32
    N = m.params()
    # the fused path's float32 work runs a 2 MiB block of rows at a time: two blocks in the
    # forward, one in the backward, beside the kept logits
    blk = 2 * 2 ** 20
    assert heads[()] == (1, f"log-prob head ({c} tokens x {V}, 300 kept)",
                         2 * blk + 300 * 4 * V, 300 * 4 * V + blk, V * h * 4, None,
                         4 * N - V * h * 4)
    assert heads[("model.dtype=bfloat16",)] == (
        0.5, f"log-prob head ({c} tokens x {V}, 300 kept)", 2 * blk + 300 * 2 * V,
        300 * 2 * V + blk, V * h * 2, None, 2 * N - V * h * 2)
    for extra in (("algorithm.entropy_coef=0.01",), ("rollout.top_k=20",)):
        assert heads[extra] == (8, f"log-prob head ({c} tokens x {V})", c * 5 * 4 * V,
                                c * 3 * 4 * V + 3 * V * h * 4, None, 2 * V * h * 4, 4 * N)


def test_mindspore_plan_keeps_the_chunks_logits_by_the_backends_own_test():
    # backend=mindspore keeps each chunk's float32 logits for the backward (1 copy of V per
    # token whatever the loss: 300 x 151,936 x 4 = 182 MB, within half of 512 MiB, with or
    # without a differentiable entropy) and recomputes them above (1,024 tokens: 622 MB); its
    # head's weight gradient is one (V, h) accumulator either way, not torch's 3 copies
    from mindrl.backends.chunking import MINDSPORE_KEPT_COPIES, recomputes_chunks
    from mindrl.memory.plan import setup_from_config

    m = known_shape("Qwen2.5-0.5B")
    V, h, c = 151_936, m.hidden, 44
    over = ["backend=mindspore", "data.max_prompt_len=16", "train.micro_batch_size=1",
            "plan.device_memory_gb=100"]
    for tokens, extra, kept in ((300, [], True), (300, ["algorithm.entropy_coef=0.01"], True),
                                (1024, [], False)):
        s = setup_from_config(load_config(None, over + [f"rollout.max_new_tokens={tokens}"]
                                          + extra), "train", m)
        parts = plan_memory(m, s).parts
        head = [p for p in parts if p.name.startswith("log-prob head (")][0]
        bwd = [p for p in parts if p.name == "log-prob head in the backward"][0]
        assert s.head_chunk == c
        assert kept == (not recomputes_chunks(tokens, c, V, MINDSPORE_KEPT_COPIES))
        if kept:
            assert (head.name, head.bytes, bwd.bytes) == (
                f"log-prob head ({c} tokens x {V}, {tokens} kept)",
                c * 5 * 4 * V + tokens * 4 * V,
                c * 3 * 4 * V + tokens * 4 * V - c * 4 * V + V * h * 4), extra
        else:
            assert (head.name, head.bytes, bwd.bytes) == (
                f"log-prob head ({c} tokens x {V})", c * 5 * 4 * V, c * 3 * 4 * V + V * h * 4)


def test_mindspore_cpu_plan_holds_the_chunk_gradient_buffer_and_its_runtime():
    # backend=mindspore's compiled chunked step (RL, SFT, preference; bf16 weights) that runs
    # each chunk's head again (1,024 response tokens: their logits do not fit half the head's
    # budget) sums the head weight's gradient over the chunks in one (V, h) buffer held between
    # steps; one that keeps the logits (256 tokens) has no buffer, its weight gradient is one
    # product that lives through the decoder backward. With float32 weights on CPU the head
    # runs in host memory (host_head.py): no buffer, no product, no embedding temporaries, and
    # the compiled backward's gradients leave out the (V, h) table. On CPU its compiled graphs
    # keep more than torch's runtime (both measured at Qwen2.5-0.5B's width,
    # bench/memory_plan.py)
    from mindrl.memory.plan import RUNTIME_GB, setup_from_config

    m = known_shape("Qwen2.5-0.5B")
    over = ["data.max_prompt_len=64", "train.micro_batch_size=4",
            "algorithm.kl.coef=0", "plan.device_memory_gb=1000"]
    plans = {}
    for backend, job, T, dtype in (("mindspore", "train", 1024, "bfloat16"),
                                   ("mindspore", "sft", 1024, "bfloat16"),
                                   ("torch", "train", 1024, "bfloat16"),
                                   ("mindspore", "kept", 64, "bfloat16"),
                                   ("mindspore", "host", 1024, "float32"),
                                   ("mindspore", "host-kept", 64, "float32")):
        cfg = load_config(None, over + [f"backend={backend}", f"rollout.max_new_tokens={T}",
                                        f"data.max_response_len={T}", f"model.dtype={dtype}"])
        plans[backend, job] = plan_memory(m, setup_from_config(
            cfg, "sft" if job == "sft" else "train", m))
    parts = {k: {p.name: p for p in v.parts} for k, v in plans.items()}
    acc = parts["mindspore", "train"]["chunked head's gradient accumulator"]
    assert acc.phase == "held" and acc.bytes == 151936 * 896 * 2
    assert parts["mindspore", "sft"]["chunked head's gradient accumulator"].bytes == acc.bytes
    assert "chunked head's gradient accumulator" not in parts["torch", "train"]
    assert "chunked head's gradient accumulator" not in parts["mindspore", "kept"]
    kept = parts["mindspore", "kept"]["chunked head's weight gradient"]
    assert kept.phase == "bwd-end" and kept.bytes == acc.bytes
    assert "chunked head's weight gradient" not in parts["mindspore", "train"]
    assert any(p.startswith("log-prob head (44 tokens") and "kept" in p
               for p in parts["mindspore", "kept"])
    table = 151936 * 896 * 4                        # tied: one (V, h) float32 table
    for job in ("host", "host-kept"):
        got = parts["mindspore", job]
        for name in ("chunked head's gradient accumulator", "chunked head's weight gradient",
                     "embedding gradient temporaries"):
            assert name not in got, (job, name)
        assert got["gradients"].bytes == 4 * m.params() - table
        assert got["gradient accumulator (float32)"].bytes == 4 * m.params()
    assert any(p.startswith("log-prob head (44 tokens") and "kept" in p
               for p in parts["mindspore", "host-kept"])
    run = "runtime (allocator, kernels, context)"
    assert parts["mindspore", "train"][run].bytes == RUNTIME_GB["mindspore", "cpu"] * GB > \
        parts["torch", "train"][run].bytes == RUNTIME_GB["cpu"] * GB


def test_mindspore_cpu_plan_counts_the_compiled_backwards_kernel_outputs():
    # MindSpore on CPU keeps every kernel output of a compiled graph until it returns: the
    # decoder backward (with its recomputed forward) holds 9 x the activations a layer saves
    # per token, and 16 float32 copies of the attention scores per layer: all (S, S) on rows of
    # up to 1,024 tokens, one block of 128 queries on longer rows (the blocked kernel). By hand,
    # Qwen2.5-0.5B (24 layers, h 896, 14 heads of 64, i 4,864) in float32: a layer saves
    # 24 h (norms) + 20 q + 4 x 14 (attention) + 16 i (MLP) = 117,304 bytes per token.
    from mindrl.memory.plan import setup_from_config

    m = known_shape("Qwen2.5-0.5B")
    saved = 24 * 896 + 20 * 896 + 4 * 14 + 16 * 4864
    assert saved == 117_304
    name = "compiled backward's kernel outputs"
    cases = {(4, 64, 64): 24 * (4 * 128 * 9 * saved + 4 * 14 * 128 * 128 * 4 * 16),
             (1, 32, 1024): 24 * (1056 * 9 * saved + 14 * 128 * 1056 * 4 * 16)}
    for (rows, P, T), want in cases.items():
        over = [f"data.max_prompt_len={P}", f"rollout.max_new_tokens={T}",
                f"train.micro_batch_size={rows}", "algorithm.kl.coef=0",
                "plan.device_memory_gb=1000"]
        plans = {}
        for backend, device in (("mindspore", "cpu"), ("mindspore", "ascend"), ("torch", "cpu")):
            cfg = load_config(None, over + [f"backend={backend}", f"device={device}"])
            plans[backend, device] = plan_memory(m, setup_from_config(cfg, "train", m))
        ms_cpu = {p.name: p for p in plans["mindspore", "cpu"].parts}
        assert ms_cpu[name].bytes == want and ms_cpu[name].phase == "bwd-end"
        # it lies in the peak: the held parts + the end of the backward
        plan = plans["mindspore", "cpu"]
        assert plan.peak_phase() == "bwd-end"
        assert plan.peak() == plan.phase_total("held") + plan.phase_total("bwd-end")
        assert name in [p.name for p in plan.counted()]
        for other in (("mindspore", "ascend"), ("torch", "cpu")):
            assert name not in [p.name for p in plans[other].parts]


def test_mindspore_plan_blocks_long_rows_as_the_kernel_does():
    # the plan's copy of the blocked attention's thresholds (plain Python: the plan does not
    # import mindspore) agrees with the kernel's
    from mindrl.backends.mindspore import kernels
    from mindrl.memory import plan

    assert (plan.MS_LONG_ROWS, plan.MS_QUERY_BLOCK, plan.MS_BLOCK_SCORES) == (
        kernels.LONG_ROWS, kernels.QUERY_BLOCK, kernels.BLOCK_SCORES)
    for keys in (1025, 1056, 2080, 5120, 5121, 8192, 16384, 65536):
        assert plan.ms_query_block(keys) == kernels.query_block(kernels.QUERY_BLOCK, keys)
    assert [plan.ms_query_block(k) for k in (1056, 8192, 16384, 65536)] == [128, 64, 32, 16]
