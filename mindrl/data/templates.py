"""Chat templates: how a problem becomes the prompt string the model continues.

The template used in evaluation must match the one used in training: in the experiment log a
model trained without a template scored 90.6 on GSM8K evaluated the same way and 64.4 under a
CoT chat template. Templates:

``qwen25-math-cot``  Qwen2.5-Math's CoT prompt (its evaluation harness): ChatML with the system
                     message "Please reason step by step, and put your final answer within
                     \\boxed{}." and the raw problem as the user turn.
``qwen25-chat``      Qwen2.5-Instruct's default ChatML: system "You are Qwen, created by Alibaba
                     Cloud. You are a helpful assistant.", the problem followed by the boxed
                     instruction as the user turn.
``r1-think``         DeepSeek-R1-Zero's plain-text conversation asking for <think> reasoning and
                     an <answer> tag; the assistant turn is opened with "<think>".
``none``             the raw problem, nothing added.
``model``            the tokenizer's own ``apply_chat_template`` (needs ``tokenizer``).
``model-boxed``      the tokenizer's own template with the boxed instruction after the problem
                     (DeepSeek-R1-Distill's recommended prompt: no system message, the
                     instruction in the user turn).

``system_prompt`` (non-empty) replaces the template's system message (for ``r1-think`` it
replaces the preamble).

Two kinds of problem text are not plain strings (both are ``str`` subclasses made by the data
loaders, :mod:`mindrl.data.formats`):

:class:`Templated`   a prompt that is already in a model's chat format (AReaL-boba's
                     ``<|im_start|>user ...`` prompts): rendered as-is under every template, so
                     it is never wrapped twice. Loaders make one when the text carries a chat
                     marker (:data:`CHAT_MARKERS`) and ``data.templated_prompts`` is ``auto``
                     (``always`` / ``never`` force it).
:class:`ChatPrompt`  a prompt given as chat messages (verl's ``prompt`` column): the text is the
                     last user turn, ``system`` the system turn. The system turn is the system
                     prompt unless ``system_prompt`` is set; template ``model`` renders every
                     turn with the tokenizer's template (what verl does), the other templates
                     the user turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from mindrl.registry import Registry

BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
QWEN25_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
R1_PREAMBLE = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant "
    "solves it. The Assistant first thinks about the reasoning process in the mind and then "
    "provides the User with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning "
    "process here </think> <answer> answer here </answer>."
)


CHAT_MARKERS = ("<|im_start|>", "<|start_header_id|>", "<\uff5cUser\uff5c>",
                "<\uff5cAssistant\uff5c>", "<start_of_turn>", "[INST]", "<|user|>",
                "<|assistant|>")


class Templated(str):
    """Prompt text already in a model's chat format: :func:`render_prompt` returns it as-is."""


class ChatPrompt(str):
    """The last user turn of a chat-message prompt, with its ``system`` turn and all
    ``messages`` (a tuple of ``{"role", "content"}`` dicts)."""

    def __new__(cls, text: str, system: str = "", messages=()):
        obj = super().__new__(cls, text)
        obj.system = system
        obj.messages = tuple(messages)
        return obj

    def __reduce__(self):  # picklable for the reward worker processes
        return (ChatPrompt, (str(self), self.system, self.messages))


def has_chat_markers(text: str) -> bool:
    """True when ``text`` carries a chat-template marker (``<|im_start|>``, Llama-3 headers,
    DeepSeek's ``<\uff5cUser\uff5c>``, Gemma turns, ``[INST]``, ...)."""
    return any(m in text for m in CHAT_MARKERS)


def chatml(system: str, user: str) -> str:
    """A ChatML prompt (Qwen family) with the assistant turn opened."""
    sys_part = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    return f"{sys_part}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    render: Callable[..., str]        # (problem, system_prompt, tokenizer) -> prompt string
    needs_tokenizer: bool = False
    help: str = ""


TEMPLATES: Registry = Registry("chat template")


def _register(name: str, help: str, needs_tokenizer: bool = False):  # noqa: A002
    def deco(fn):
        TEMPLATES.register(name, ChatTemplate(name, fn, needs_tokenizer, help))
        return fn
    return deco


@_register("qwen25-math-cot", "Qwen2.5-Math CoT: boxed instruction as the system message")
def _qwen25_math_cot(problem: str, system_prompt: str = "", tokenizer=None) -> str:
    return chatml(system_prompt or BOXED_INSTRUCTION, problem)


@_register("qwen25-chat", "Qwen2.5-Instruct default system, boxed instruction after the problem")
def _qwen25_chat(problem: str, system_prompt: str = "", tokenizer=None) -> str:
    return chatml(system_prompt or QWEN25_DEFAULT_SYSTEM, f"{problem}\n{BOXED_INSTRUCTION}")


@_register("r1-think", "DeepSeek-R1-Zero: <think> reasoning, <answer> tags, plain text")
def _r1_think(problem: str, system_prompt: str = "", tokenizer=None) -> str:
    return f"{system_prompt or R1_PREAMBLE} User: {problem} Assistant: <think>"


@_register("none", "the raw problem text")
def _none(problem: str, system_prompt: str = "", tokenizer=None) -> str:
    return f"{system_prompt}\n\n{problem}" if system_prompt else problem


@_register("model", "the tokenizer's own chat template (tokenizer.apply_chat_template)",
           needs_tokenizer=True)
def _model(problem: str, system_prompt: str = "", tokenizer=None) -> str:
    if getattr(tokenizer, "chat_template", None) in (None, ""):
        raise ValueError("chat template 'model' needs a tokenizer with a chat_template; this "
                         "tokenizer has none (pick one of: "
                         f"{', '.join(n for n in TEMPLATES.names() if n != 'model')})")
    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + \
        [{"role": "user", "content": problem}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


@_register("model-boxed", "the tokenizer's own chat template, the boxed instruction after the "
           "problem (DeepSeek-R1-Distill usage)", needs_tokenizer=True)
def _model_boxed(problem: str, system_prompt: str = "", tokenizer=None) -> str:
    return _model(f"{problem}\n{BOXED_INSTRUCTION}", system_prompt, tokenizer)


def render_prompt(problem: str, template: str, tokenizer=None, system_prompt: str = "") -> str:
    """The prompt string for ``problem`` under ``template`` (a name in :data:`TEMPLATES`).

    >>> render_prompt("1+1?", "qwen25-math-cot").splitlines()[1]
    'Please reason step by step, and put your final answer within \\\\boxed{}.<|im_end|>'
    """
    t: ChatTemplate = TEMPLATES.get(template)
    if isinstance(problem, Templated):
        return str(problem)
    if t.needs_tokenizer and tokenizer is None:
        raise ValueError(f"chat template '{template}' needs a tokenizer")
    if isinstance(problem, ChatPrompt):
        system_prompt = system_prompt or problem.system
        if template == "model" and len(problem.messages) > 1:
            if getattr(tokenizer, "chat_template", None) in (None, ""):
                return _model(str(problem), system_prompt, tokenizer)  # raises, naming why
            turns = [dict(m) for m in problem.messages if m.get("role") != "system"]
            msgs = ([{"role": "system", "content": system_prompt}] if system_prompt else []) \
                + turns
            return tokenizer.apply_chat_template(msgs, tokenize=False,
                                                 add_generation_prompt=True)
        problem = str(problem)
    return t.render(problem, system_prompt=system_prompt, tokenizer=tokenizer)


def check_template(template: str, tokenizer=None) -> Optional[str]:
    """None if ``template`` is usable with ``tokenizer``, else the reason it is not."""
    if template not in TEMPLATES:
        try:
            TEMPLATES.get(template)
        except KeyError as e:
            return str(e)
    if template == "model" and getattr(tokenizer, "chat_template", None) in (None, ""):
        return "the tokenizer has no chat_template"
    return None


# ------------------------------------------------------------------------ whole conversations
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def think_block(reasoning: str) -> str:
    """The reasoning written into the assistant text when the template has no place for it:
    ``<think>\\n{reasoning}\\n</think>\\n\\n`` (DeepSeek-R1 / Qwen3 layout)."""
    return f"{THINK_OPEN}\n{reasoning.strip()}\n{THINK_CLOSE}\n\n"


def has_reasoning_slot(tokenizer) -> bool:
    """True when the tokenizer's own chat template reads a ``reasoning_content`` field (Qwen3,
    newer DeepSeek templates): the reasoning is then passed there, not in the content."""
    return "reasoning_content" in str(getattr(tokenizer, "chat_template", None) or "")


def render_chat(messages, template: str, tokenizer=None, system_prompt: str = "",
                add_generation_prompt: bool = False) -> str:
    """The text of a whole conversation under ``template`` (SFT on chat data).

    ``messages``: dicts with ``role`` (system / user / assistant), ``content`` and, for
    assistant turns, an optional ``reasoning``. For every template the conversation cut before
    an assistant turn, rendered with ``add_generation_prompt=True``, is a prefix of the whole
    text, and for one user turn it equals :func:`render_prompt` (what RL rolls out from).

    - System: ``system_prompt`` if set, else the data's system turns, else the template's
      default.
    - The template's change to the problem (``qwen25-chat`` / ``model-boxed``: the boxed
      instruction after it) applies to the first user turn only.
    - Reasoning: with ``model`` / ``model-boxed`` and a template that reads
      ``reasoning_content``, it goes there; otherwise :func:`think_block` is put before the
      content. ``r1-think`` opens ``<think>`` in the prompt, so the turn continues after it.
    - ``r1-think`` and ``none`` render one user turn and its answer only (ValueError otherwise).
    """
    t: ChatTemplate = TEMPLATES.get(template)
    if t.needs_tokenizer and tokenizer is None:
        raise ValueError(f"chat template '{template}' needs a tokenizer")
    system = system_prompt or "\n\n".join(str(m["content"]) for m in messages
                                          if m["role"] == "system")
    turns = [m for m in messages if m["role"] != "system"]
    first_user = next((i for i, m in enumerate(turns) if m["role"] == "user"), -1)
    boxed = template in ("qwen25-chat", "model-boxed")

    def content_of(i: int, m, slot: bool = False) -> str:
        text = str(m["content"])
        if boxed and i == first_user:
            text = f"{text}\n{BOXED_INSTRUCTION}"
        if m["role"] == "assistant" and m.get("reasoning") and not slot:
            text = think_block(m["reasoning"]) + text
        return text

    if template in ("model", "model-boxed"):
        if getattr(tokenizer, "chat_template", None) in (None, ""):
            return _model("", system, tokenizer)        # raises, naming why
        slot = has_reasoning_slot(tokenizer)
        out = [{"role": "system", "content": system}] if system else []
        for i, m in enumerate(turns):
            msg = {"role": m["role"], "content": content_of(i, m, slot)}
            if slot and m["role"] == "assistant" and m.get("reasoning"):
                msg["reasoning_content"] = str(m["reasoning"]).strip()
            out.append(msg)
        return tokenizer.apply_chat_template(out, tokenize=False,
                                             add_generation_prompt=add_generation_prompt)
    if template in ("qwen25-math-cot", "qwen25-chat"):
        default = BOXED_INSTRUCTION if template == "qwen25-math-cot" else QWEN25_DEFAULT_SYSTEM
        text = f"<|im_start|>system\n{system or default}<|im_end|>\n"
        for i, m in enumerate(turns):
            text += f"<|im_start|>{m['role']}\n{content_of(i, m)}<|im_end|>\n"
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")
    # one-turn plain-text templates (r1-think, none, and any registered later)
    roles = [m["role"] for m in turns]
    if roles not in (["user"], ["user", "assistant"]):
        raise ValueError(f"chat template '{template}' renders one user turn and its answer; "
                         f"this conversation has turns {' -> '.join(roles)} (use a chat "
                         f"template: model, qwen25-chat, qwen25-math-cot)")
    prompt = t.render(str(turns[0]["content"]), system_prompt=system, tokenizer=tokenizer)
    if add_generation_prompt or len(turns) == 1:
        return prompt
    answer = content_of(1, turns[1])
    if template == "r1-think" and answer.startswith(THINK_OPEN):
        answer = answer[len(THINK_OPEN):]           # the prompt already opened <think>
    return prompt + answer
