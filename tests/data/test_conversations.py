"""Chat SFT data (mindrl.data.conversations, templates.render_chat): each published shape is
detected and read into the expected conversation; the loss mask is checked token by token
against hand-written segments; the reasoning goes where the template puts it; data errors are
one line naming file, 1-based row and field."""

import pytest

from mindrl.data.conversations import detect_format, encode_conversation, load_conversations
from mindrl.data.io import DataError, read_rows
from mindrl.data.templates import render_chat, render_prompt
from sft_shapes import SHAPES, SYSTEM_OT, openr1_math, s1k, _write


@pytest.fixture(scope="module")
def tok(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dir)


def _load(path, **kw):
    raw = read_rows(path)
    fmt, col = detect_format(raw[0], kw.pop("fmt", "auto"), kw.pop("response_field", ""))
    return fmt, load_conversations(path, fmt, col, rows=raw, **kw)


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_published_shape_is_detected_and_read(tmp_path, name):
    build, fmt, n = SHAPES[name]
    got_fmt, rows = _load(build(tmp_path))
    assert got_fmt == fmt
    assert len(rows) == n
    for r in rows:
        roles = [m["role"] for m in r["messages"]]
        assert roles[-1] == "assistant" and "user" in roles
        assert all(isinstance(m["content"], str) for m in r["messages"])


def test_shapes_give_the_expected_first_conversation(tmp_path):
    expected = {
        "OpenR1-Math-220k": [
            {"role": "user", "content": "what is 2 plus 3"},
            {"role": "assistant", "content": "<think>\nadd 2 and 3\n</think>\n\nthe answer is 5"}],
        "Nemotron-Post-Training-v1": [
            {"role": "system", "content": ""}, {"role": "user", "content": "what is 2 plus 2"},
            {"role": "assistant", "content": "<think>\ntwo and two\n</think>\n\n4"}],
        "OpenThoughts-114k": [
            {"role": "system", "content": SYSTEM_OT},
            {"role": "user", "content": "what is 1 times 2"},
            {"role": "assistant", "content": "<|begin_of_thought|>\n\n1 times 2\n\n"
             "<|end_of_thought|>\n\n<|begin_of_solution|>\n\n2\n\n<|end_of_solution|>"}],
        "AM-DeepSeek-R1-0528-Distilled": [
            {"role": "user", "content": "what is 7 minus 1"},
            {"role": "assistant",
             "content": "<think>\n7 take 1\n</think>\n<answer>\n6\n</answer>"}],
        "s1K": [{"role": "user", "content": "what is 8 divided by 2"},
                {"role": "assistant", "content": "4", "reasoning": "divide 8 by 2"}],
        "dolphin-r1": [{"role": "user", "content": "what is 1 plus 1"},
                       {"role": "assistant", "content": "2", "reasoning": "1 and 1 make 2"}],
    }
    for name, want in expected.items():
        _, rows = _load(SHAPES[name][0](tmp_path))
        assert rows[0]["messages"] == want, name


def test_trace_lists_pick_the_first_correct_trace(tmp_path):
    path = openr1_math(tmp_path)
    fmt, rows = _load(path, response_field="generations")     # the list column, not its text
    assert fmt == "traces"
    # row 1: generations = [wrong, right], correctness_math_verify = [False, True]
    assert rows[0]["messages"][1]["content"].endswith("the answer is 5")
    _, first = _load(path, response_field="generations", trace_select="first")
    assert first[0]["messages"][1]["content"].endswith("the answer is 6")
    # a row whose traces are all wrong is dropped (and counted), not trained on
    raw = read_rows(path)
    raw[1]["correctness_math_verify"] = [False, False]
    rows = load_conversations(path, "traces", "generations", rows=raw)
    assert [r["problem"] for r in rows] == ["what is 2 plus 3", "what is 6 plus 2"]


def test_mask_is_one_on_assistant_turns_only_token_by_token(tok):
    msgs = [{"role": "system", "content": "be brief"},
            {"role": "user", "content": "what is 2 plus 3"},
            {"role": "assistant", "content": "5", "reasoning": "add them"},
            {"role": "user", "content": "and times 2"},
            {"role": "assistant", "content": "10"},
            {"role": "user", "content": "thanks"}]               # trailing user turn: dropped
    render = lambda m, g: render_chat(m, "model", tok, "", g)  # noqa: E731
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    prompt, ids, mask = encode_conversation(msgs, render, enc, ["<|im_end|>", "<|endoftext|>"],
                                            tok.eos_token_id)
    # the tiny model's ChatML template, written out by hand
    want_prompt = enc("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\n"
                      "what is 2 plus 3<|im_end|>\n<|im_start|>assistant\n")
    segments = [("<think>\nadd them\n</think>\n\n5<|im_end|>", 1.0),
                ("\n<|im_start|>user\nand times 2<|im_end|>\n<|im_start|>assistant\n", 0.0),
                ("10<|im_end|>", 1.0)]
    want_ids, want_mask = [], []
    for text, m in segments:
        t = enc(text)
        want_ids += t
        want_mask += [m] * len(t)
    assert prompt == want_prompt
    assert ids == want_ids
    assert mask == want_mask
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert [i for i, m in zip(ids, mask) if m == 1.0].count(im_end) == 2   # both turn ends


def test_single_turn_prompt_is_the_rl_prompt_for_every_template(tok):
    msgs = [{"role": "user", "content": "what is 4 plus 4"},
            {"role": "assistant", "content": "8", "reasoning": "four and four"}]
    for name in ("model", "model-boxed", "qwen25-chat", "qwen25-math-cot", "r1-think", "none"):
        head = render_chat(msgs[:1], name, tok, "", True)
        assert head == render_prompt("what is 4 plus 4", name, tokenizer=tok), name
        full = render_chat(msgs, name, tok, "", False)
        assert full.startswith(head) and "four and four" in full[len(head):], name
    # r1-think opened <think> in the prompt: the turn continues inside it
    assert render_chat(msgs, "r1-think", tok).endswith("Assistant: <think>\nfour and four\n"
                                                        "</think>\n\n8")


QWEN3_LIKE = (   # the part of Qwen3's template that places reasoning_content (layout changed
    # on purpose to "<think>R</think>" so the test sees the template's place, not mindrl's)
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' }}"
    "{%- if m['role'] == 'assistant' and m.get('reasoning_content') %}"
    "{{- '<think>' + m['reasoning_content'] + '</think>' }}{%- endif %}"
    "{{- m['content'] + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
R1_DISTILL_LIKE = (  # DeepSeek-R1-Distill's template keeps only the text after </think>
    "{%- for m in messages %}{%- set c = m['content'] %}"
    "{%- if m['role'] == 'assistant' and '</think>' in c %}"
    "{%- set c = c.split('</think>')[-1] %}{%- endif %}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + c + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def test_reasoning_goes_where_the_models_template_puts_it(tok):
    msgs = [{"role": "user", "content": "what is 1 plus 2"},
            {"role": "assistant", "content": "3", "reasoning": "one and two"}]
    old = tok.chat_template
    try:
        tok.chat_template = QWEN3_LIKE
        text = render_chat(msgs, "model", tok)
        assert text.endswith("<|im_start|>assistant\n<think>one and two</think>3<|im_end|>\n")
        tok.chat_template = R1_DISTILL_LIKE
        render = lambda m, g: render_chat(m, "model", tok, "", g)  # noqa: E731
        with pytest.raises(ValueError, match="drops the reasoning"):
            encode_conversation(msgs, render, lambda s: tok.encode(s, add_special_tokens=False),
                                ["<|im_end|>"], 0)
    finally:
        tok.chat_template = old


def test_templates_without_end_marker_end_with_eos(tok):
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]
    render = lambda m, g: render_chat(m, "none", tok, "", g)  # noqa: E731
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    prompt, ids, mask = encode_conversation(msgs, render, enc, ["<|im_end|>"], 7)
    assert prompt == enc("hi") and ids == enc("yes") + [7] and mask == [1.0] * len(ids)
    with pytest.raises(ValueError, match="one user turn"):
        render_chat(msgs + msgs, "none", tok)


def test_bad_rows_name_file_row_and_field(tmp_path):
    rows = [{"system": "", "conversations": [{"from": "human", "value": "a"},
                                             {"from": "gpt", "value": "b"}]},
            {"system": "", "conversations": [{"from": "human", "value": "a"},
                                             {"from": "bot", "value": "b"}]}]
    path = _write(tmp_path / "chat.jsonl", rows)
    with pytest.raises(DataError) as e:
        _load(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: row 2: field 'conversations[1].from'") and "'bot'" in msg
    rows[1]["conversations"][1] = {"from": "gpt", "value": None}
    with pytest.raises(DataError, match=r"row 2: field 'conversations\[1\]\.value': expected "
                                        r"text, got NoneType"):
        _load(_write(tmp_path / "chat.jsonl", rows))
    rows[1]["conversations"] = [{"from": "human", "value": "only a question"}]
    with pytest.raises(DataError, match=r"row 2: field 'conversations': no assistant turn"):
        _load(_write(tmp_path / "chat.jsonl", rows))


def test_s1k_missing_prompt_column_is_named(tmp_path):
    raw = read_rows(s1k(tmp_path))
    for r in raw:
        r.pop("question")
    with pytest.raises(DataError, match=r"row 1: no prompt field .*data.prompt_field"):
        load_conversations(tmp_path / "s1k.parquet", "traces", "thinking_trajectories",
                           rows=raw)


def test_inspect_shows_the_whole_conversation_with_trained_turns_marked(tmp_path):
    """`mindrl data inspect` shows a chat file's SFT view as `mindrl sft` trains on it: every
    turn, the assistant (trained) turns marked with *, reasoning in a think block."""
    import json

    from mindrl.data.convert import inspect_lines

    path = tmp_path / "sg.jsonl"
    row = {"system": "Be brief.", "conversations": [
        {"from": "user", "value": "1+1?"}, {"from": "assistant", "value": "2"},
        {"from": "user", "value": "2+2?"}, {"from": "assistant", "value": "4"}]}
    path.write_text(json.dumps(row) + "\n")
    sft = [ln for ln in inspect_lines(path, rows=1) if "response=" in ln]
    assert len(sft) == 1
    assert sft[0].endswith("problem=1+1?, response=[system] Be brief. | [user] 1+1? | "
                           "[assistant*] 2 | [user] 2+2? | [assistant*] 4")


def test_large_chat_files_are_read_as_taken(tmp_path):
    """A .jsonl / .parquet chat file is checked in one pass and then read as taken
    (ConversationRows under a FileStream): the same rows as the eager loader, rows without a
    correct trace dropped, each kept row once per epoch, a bad row deep in the file named
    before any model loads."""
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mindrl.data.conversations import index_conversations, load_conversations
    from mindrl.data.io import DataError
    from mindrl.trainer.prompts import FileStream

    rows = []
    for k in range(40):
        ok = k % 3 != 1                   # every third row has no correct trace: dropped
        rows.append({"problem": f"p{k}", "answer": str(k),
                     "generations": [f"t{k}a", f"t{k}b"],
                     "correctness_math_verify": [False, ok]})
    pq_path = tmp_path / "traces.parquet"
    pq.write_table(pa.Table.from_pylist(rows), pq_path, row_group_size=7)   # 6 row groups
    jl_path = tmp_path / "traces.jsonl"
    jl_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for path in (pq_path, jl_path):
        eager = load_conversations(path, "traces", "generations")
        lazy = index_conversations(path, "traces", "generations")
        assert len(lazy) == len(eager) == 27
        assert lazy.get(range(len(lazy))) == eager
        assert eager[1]["where"] == f"{path}: row 3" and eager[1]["answer"] == "2"
        stream = FileStream(lazy, seed=5, shuffle=True, window_rows=10)
        epoch = [r["problem"] for r in stream.take(27)]
        assert sorted(epoch) == sorted(r["problem"] for r in eager) and len(set(epoch)) == 27
    bad = rows[:30] + [{"problem": "p", "generations": "not a list"}] + rows[30:]
    jl_bad = tmp_path / "bad.jsonl"
    jl_bad.write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.raises(DataError, match=r"row 31"):
        index_conversations(jl_bad, "traces", "generations")
    assert np.asarray(lazy.source.keep).dtype == np.int64
