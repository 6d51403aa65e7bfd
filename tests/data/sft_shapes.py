"""Three-row fixtures in the published shape (columns, nesting, file type) of the SFT data sets
that mindrl reads; the texts are invented and short. Used by tests/data/test_conversations.py
and tests/trainer/test_sft_loop.py.

Sources of the shapes (dataset cards, `dataset_info.features`):
- OpenR1-Math-220k: https://huggingface.co/datasets/open-r1/OpenR1-Math-220k/blob/075afe03dbbc6e7b8bd35af1e4259957f0beb07d/README.md
  (parquet; problem, solution, answer, problem_type, question_type, source, uuid,
  is_reasoning_complete[bool], generations[str], correctness_math_verify[bool],
  correctness_llama[bool], finish_reasons[str], correctness_count, messages[{content, role}])
- Nemotron-Post-Training-Dataset-v1: https://huggingface.co/datasets/nvidia/Nemotron-Post-Training-Dataset-v1
  (parquet; uuid, license, generator, version, category, reasoning "on"/"off",
  messages[{role, content}]; features as listed on the v2 card, same layout)
- OpenThoughts-114k: two fields, system and conversations[{from, value}] (per
  https://huggingface.co/datasets/akahana/OpenThoughts-114k-math README, which describes the
  original); parquet
- Bespoke-Stratos-17k: https://huggingface.co/datasets/bespokelabs/Bespoke-Stratos-17k
  (parquet; system, conversations[{from, value}], as the derived cards list)
- AM-DeepSeek-R1-0528-Distilled: jsonl; conversations[{from, value, info}] (the task's
  description; the card was not retrievable here, so `info` is kept per turn as in the
  a-m-team 1.4M release)
- s1K: https://huggingface.co/datasets/simplescaling/data_ablation_diverse1K (same features as
  simplescaling/s1K: solution, question, cot_type, source_type, metadata, cot (null),
  thinking_trajectories[str], attempt); parquet
- dolphin-r1 reasoning subsets: https://huggingface.co/datasets/cognitivecomputations/dolphin-r1
  (dolphin-r1-reasoning-deepseek.jsonl: messages[{role, content}] without the answer, model,
  reasoning, answer)
"""

import json
from pathlib import Path


def _write(path: Path, rows):
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def openr1_math(d: Path) -> Path:
    rows = []
    for k, (a, b) in enumerate([(2, 3), (4, 1), (6, 2)]):
        good = f"<think>\nadd {a} and {b}\n</think>\n\nthe answer is {a + b}"
        bad = f"<think>\nguess\n</think>\n\nthe answer is {a + b + 1}"
        gens = [bad, good] if k == 0 else [good, bad]
        rows.append({
            "problem": f"what is {a} plus {b}", "solution": f"{a} + {b} = {a + b}",
            "answer": str(a + b), "problem_type": "Algebra", "question_type": "math-word-problem",
            "source": "olympiads", "uuid": f"u{k}", "is_reasoning_complete": [True, True],
            "generations": gens,
            "correctness_math_verify": [False, True] if k == 0 else [True, False],
            "correctness_llama": None, "finish_reasons": None, "correctness_count": 1,
            "messages": [{"content": f"what is {a} plus {b}", "role": "user"},
                         {"content": good, "role": "assistant"}]})
    return _write(d / "openr1_math.parquet", rows)


def nemotron_v1(d: Path) -> Path:
    base = {"license": "cc-by-4.0", "generator": "DeepSeek-R1", "version": "v1",
            "category": "math"}
    rows = [
        {"uuid": "n0", **base, "reasoning": "on", "messages": [
            {"role": "system", "content": ""},
            {"role": "user", "content": "what is 2 plus 2"},
            {"role": "assistant", "content": "<think>\ntwo and two\n</think>\n\n4"}]},
        {"uuid": "n1", **base, "category": "chat", "reasoning": "off", "messages": [
            {"role": "system", "content": ""},
            {"role": "user", "content": "say yes"},
            {"role": "assistant", "content": "yes"},
            {"role": "user", "content": "say no"},
            {"role": "assistant", "content": "no"}]},
        {"uuid": "n2", **base, "reasoning": "off", "messages": [
            {"role": "system", "content": ""},
            {"role": "user", "content": "what is 5 minus 1"},
            {"role": "assistant", "content": "4"}]},
    ]
    return _write(d / "nemotron_v1.parquet", rows)


SYSTEM_OT = "Your role as an assistant involves thinking before you answer."


def _stratos_like(d: Path, name: str) -> Path:
    rows = []
    for a, b in [(1, 2), (3, 4), (5, 1)]:
        rows.append({"system": SYSTEM_OT, "conversations": [
            {"from": "user", "value": f"what is {a} times {b}"},
            {"from": "assistant", "value": f"<|begin_of_thought|>\n\n{a} times {b}\n\n"
                                           f"<|end_of_thought|>\n\n<|begin_of_solution|>\n\n"
                                           f"{a * b}\n\n<|end_of_solution|>"}]})
    return _write(d / name, rows)


def openthoughts(d: Path) -> Path:
    return _stratos_like(d, "openthoughts_114k.parquet")


def bespoke_stratos(d: Path) -> Path:
    return _stratos_like(d, "bespoke_stratos_17k.parquet")


def am_r1_0528(d: Path) -> Path:
    rows = []
    for k, (a, b) in enumerate([(7, 1), (2, 2), (9, 3)]):
        rows.append({"conversations": [
            {"from": "human", "value": f"what is {a} minus {b}",
             "info": {"source": "math", "reference_answer": str(a - b), "test_case": None}},
            {"from": "assistant", "value": f"<think>\n{a} take {b}\n</think>\n<answer>\n"
                                           f"{a - b}\n</answer>",
             "info": {"source": "deepseek-r1-0528", "reference_answer": str(a - b),
                      "test_case": None, "think_content": f"{a} take {b}",
                      "answer_content": str(a - b)}}]})
    return _write(d / "am_deepseek_r1_0528.jsonl", rows)


def s1k(d: Path) -> Path:
    rows = []
    for a, b in [(8, 2), (6, 3), (9, 9)]:
        rows.append({"solution": f"{a} / {b}", "question": f"what is {a} divided by {b}",
                     "cot_type": "math", "source_type": "AI-MO/NuminaMath-CoT/aops_forum",
                     "metadata": "{}", "cot": None,
                     "thinking_trajectories": [f"divide {a} by {b}"],
                     "attempt": f"{a // b}"})
    return _write(d / "s1k.parquet", rows)


def dolphin_r1(d: Path) -> Path:
    rows = []
    for a, b in [(1, 1), (2, 5), (3, 3)]:
        rows.append({"messages": [{"role": "user", "content": f"what is {a} plus {b}"}],
                     "model": "deepseek-ai/DeepSeek-R1",
                     "reasoning": f"{a} and {b} make {a + b}", "answer": f"{a + b}"})
    return _write(d / "dolphin-r1-reasoning-deepseek.jsonl", rows)


# name -> (builder, the format auto-detection must report, conversations expected)
SHAPES = {
    "OpenR1-Math-220k": (openr1_math, "messages", 3),
    "Nemotron-Post-Training-v1": (nemotron_v1, "messages", 3),
    "OpenThoughts-114k": (openthoughts, "sharegpt", 3),
    "Bespoke-Stratos-17k": (bespoke_stratos, "sharegpt", 3),
    "AM-DeepSeek-R1-0528-Distilled": (am_r1_0528, "sharegpt", 3),
    "s1K": (s1k, "traces", 3),
    "dolphin-r1": (dolphin_r1, "reasoning", 3),
}
