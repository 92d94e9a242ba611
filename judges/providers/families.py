"""Model families: which maker's models a judge and a response's writer belong to.

The self-preference probe (``juryflow agreement --bias``) compares a judge's verdicts on
responses written by its own family with its verdicts on the others'. A model's family is
read from its name by the first matching prefix below (case-insensitive, longest first);
a provider adds nothing a name does not say (an OpenAI-compatible server may serve a
Llama), so it is used only for a name no prefix matches and only for its own maker's
models (``anthropic`` → anthropic). A panel overrides the table per judge with
``family:`` (for a fine-tune, a local name, a simulated judge).

======================  ==========
model name starts with  family
======================  ==========
gpt-, o1, o3, o4,       openai
chatgpt, text-davinci
claude                  anthropic
llama, meta-llama       meta
mistral, mixtral,       mistral
codestral, ministral
gemini, gemma           google
qwen                    alibaba
deepseek                deepseek
command                 cohere
phi-                    microsoft
======================  ==========
"""

from __future__ import annotations

from juryflow.judges.providers.registry import provider_names, registered_provider

__all__ = ["FAMILY_PREFIXES", "family_of", "judge_family"]

FAMILY_PREFIXES: dict[str, str] = {
    "gpt-": "openai",
    "o1": "openai",
    "o3": "openai",
    "o4": "openai",
    "chatgpt": "openai",
    "text-davinci": "openai",
    "claude": "anthropic",
    "llama": "meta",
    "meta-llama": "meta",
    "mistral": "mistral",
    "mixtral": "mistral",
    "codestral": "mistral",
    "ministral": "mistral",
    "gemini": "google",
    "gemma": "google",
    "qwen": "alibaba",
    "deepseek": "deepseek",
    "command": "cohere",
    "phi-": "microsoft",
}

_BY_LENGTH = sorted(FAMILY_PREFIXES, key=len, reverse=True)


def family_of(model: str | None) -> str | None:
    """The family of a model name, or None for a name the table does not know.

    A vendor path (``openai/gpt-4o``, ``models/gemini-2.0``) is read from its last part.

    >>> family_of("gpt-4-0613"), family_of("Llama-2-7b-chat"), family_of("mistral-7B-instruct")
    ('openai', 'meta', 'mistral')
    >>> family_of("meta-llama/Llama-3-8B"), family_of("stub-sim-score") is None
    ('meta', True)
    """
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    return next((FAMILY_PREFIXES[p] for p in _BY_LENGTH if name.startswith(p)), None)


def judge_family(provider: str | None, model: str | None, override: str | None) -> str | None:
    """A judge's family: the panel's ``family:`` when given, else its model name's, else
    its provider's when the provider makes only its own models.

    >>> judge_family("openai", "gpt-4.1", None), judge_family("openai", "x", "meta")
    ('openai', 'meta')
    >>> judge_family("anthropic", "my-proxy-name", None), judge_family("openai", "x", None)
    ('anthropic', None)
    """
    if override:
        return override.strip().lower()
    found = family_of(model)
    # A provider names a family only for a name the table does not know (claude-* is
    # anthropic anyway; an unknown name on the openai provider may be any open model).
    if found is None and provider in provider_names():
        return registered_provider(provider).family
    return found
