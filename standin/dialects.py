"""How local OpenAI-compatible servers answer where OpenAI's own API would not.

``StubConfig.dialect`` (``--dialect`` on the command line) makes the stand-in's
``/v1/chat/completions`` answer as a local server does; ``openai`` (the default) is
OpenAI's API. What each local dialect does, from the servers' own documentation and issue
trackers:

=============  ==================================================================  ==========
dialect        a request with ``tools``                                            port
=============  ==================================================================  ==========
``ollama``     400 ``registry.ollama.ai/library/MODEL does not support tools``     11434
               (a model without tool support, as most small models are)
``vllm``       400 ``"auto" tool choice requires --enable-auto-tool-choice and``   8000
               ``--tool-call-parser to be set`` (a server started without them);
               a named ``tool_choice`` is answered (guided decoding)
``llamacpp``   500 ``tools param requires --jinja flag`` (a build or start          8080
               without Jinja templates)
=============  ==================================================================  ==========

All three, unlike OpenAI:

- answer a ``response_format`` JSON schema with bare JSON (vLLM's structured outputs,
  llama.cpp's schema-to-grammar, Ollama's JSON mode), as the OpenAI dialect does;
- answer a request without one as small local models write: the JSON as it is, in a
  ```json fence, or after a sentence of preamble, chosen per prompt (seeded, so a run
  repeats); a model name's ``+fenced``, ``+prefixed`` or ``+text`` option fixes the form;
- report ``usage`` without ``prompt_tokens_details`` (no cached-token count);
- have no batch API: every batch route answers 404, so ``--batch`` judges in real time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

DialectName = Literal["openai", "ollama", "vllm", "llamacpp"]
DIALECTS: tuple[DialectName, ...] = ("openai", "ollama", "vllm", "llamacpp")

PREAMBLE = "Here is my evaluation of the response, in the requested JSON format:\n\n"
"""The sentence a ``prefixed`` answer opens with before its JSON."""

TextForm = Literal["plain", "fenced", "prefixed"]
_FORMS: tuple[TextForm, ...] = ("plain", "fenced", "prefixed")


@dataclass(frozen=True, slots=True)
class LocalDialect:
    """A local server's answers where they differ from OpenAI's."""

    name: DialectName
    tools_status: int
    tools_message: str
    """What the server says of ``tools``; ``{model}`` is the model's registry name."""
    error_type: str
    """The ``type`` of the server's error body."""
    named_tool_choice: bool = False
    """A named (or ``required``) ``tool_choice`` is answered rather than refused."""

    def refuses(self, body: dict[str, Any]) -> bool:
        """Whether the server refuses this request for its ``tools``."""
        if not body.get("tools"):
            return False
        choice = body.get("tool_choice")
        return not (self.named_tool_choice and (isinstance(choice, dict) or choice == "required"))

    def refusal(self, model: str) -> tuple[int, dict[str, Any]]:
        """The status and body of the server's refusal of ``tools``."""
        name = model if ":" in model else f"{model}:latest"
        message = self.tools_message.format(model=name)
        status = self.tools_status
        if self.name == "ollama":
            error: dict[str, Any] = {
                "message": message,
                "type": self.error_type,
                "param": None,
                "code": None,
            }
        else:  # vLLM and llama.cpp put the status in ``code``
            error = {"message": message, "type": self.error_type, "param": None, "code": status}
        return status, {"error": error}


LOCAL_DIALECTS: dict[str, LocalDialect] = {
    "ollama": LocalDialect(
        "ollama", 400, "registry.ollama.ai/library/{model} does not support tools", "api_error"
    ),
    "vllm": LocalDialect(
        "vllm",
        400,
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "BadRequestError",
        named_tool_choice=True,
    ),
    "llamacpp": LocalDialect("llamacpp", 500, "tools param requires --jinja flag", "server_error"),
}


def local_dialect(name: str) -> LocalDialect | None:
    """The local dialect of that name; None for ``openai``; ValueError for any other."""
    if name not in DIALECTS:
        raise ValueError(f"unknown dialect {name!r}: use one of {', '.join(DIALECTS)}")
    return LOCAL_DIALECTS.get(name)


def text_form(seed: bytes) -> TextForm:
    """How a local model writes this answer's JSON: drawn from the answer's own seed, apart
    from the draws that made the answer, so the answer is the same in every dialect."""
    return random.Random(seed + b"|form").choice(_FORMS)


def written(text: str, form: TextForm) -> str:
    """``text`` (an answer's JSON) as a local model writes it."""
    if form == "fenced":
        return f"```json\n{text}\n```"
    if form == "prefixed":
        return PREAMBLE + text
    return text
