"""Prompt templates split into a static part (sent first, cached by the providers) and a
per-item part (issue 24, point 2)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from juryflow.prompts.files import file_template
from juryflow.prompts.loader import SPLIT_LINE, PromptError, load_template

VALUES = {"reference": '{"team": "Lions"}', "response": "The Lions won 3-1."}


def _words(text: str) -> Counter[str]:
    return Counter(text.replace(SPLIT_LINE, "").split())


def test_v2_keeps_the_seed_words_and_puts_the_item_last() -> None:
    v1, v2 = load_template("data2txt_spans@v1"), load_template("data2txt_spans")
    assert v2.version == 2 and v2.ref == "data2txt_spans@v2"
    assert _words(v2.text) == _words(v1.text)
    static, per_item = v2.render_parts(VALUES)
    assert v2.static_text == static and len(static) > 7000
    # nothing of the item above the split; all of it below
    assert VALUES["response"] not in static and VALUES["reference"] not in static
    assert per_item.startswith("## Input Format\n")
    assert per_item.endswith("**Generated Article:**\nThe Lions won 3-1.\n")
    assert v2.render(VALUES) == static + per_item
    assert SPLIT_LINE not in static + per_item
    # the whole prompt as sent has the same words as the seed rendered
    assert _words(v2.render(VALUES)) == _words(v1.render(VALUES))


def test_a_template_without_a_split_is_all_per_item() -> None:
    for name in ("data2txt_spans@v1", "hallucination_score"):
        template = load_template(name)
        values = {v: "x" for v in template.variables}
        static, per_item = template.render_parts(values)
        assert static == "" and template.static_text == ""
        assert per_item == template.render(values)


def test_unknown_versions_name_the_known_ones() -> None:
    with pytest.raises(PromptError, match="v1, v2, not v3"):
        load_template("data2txt_spans@v3")
    with pytest.raises(PromptError, match="v1, not v2"):
        load_template("hallucination_score@v2")


def test_a_prompt_file_may_split_and_is_checked() -> None:
    text = f"Rules for every item.\n\n{SPLIT_LINE}\n<response>\n{{{{ response }}}}\n</response>\n"
    template = file_template("/p/mine.txt", text, "spans")
    assert template.render_parts({"response": "a <response> b"}) == (
        "Rules for every item.\n\n",
        "<response>\na &lt;response&gt; b\n</response>\n",
    )
    above = f"{{{{ response }}}}\n{SPLIT_LINE}\nrest\n"
    with pytest.raises(PromptError, match="sits above the '\\{\\{-- per item --\\}\\}' line"):
        file_template("/p/mine.txt", above, "spans")
    twice = f"a\n{SPLIT_LINE}\nb\n{SPLIT_LINE}\n{{{{ response }}}}\n"
    with pytest.raises(PromptError, match="has 2"):
        file_template("/p/mine.txt", twice, "spans")


def test_the_split_line_is_documented_in_prompts_readme() -> None:
    readme = Path(__file__).resolve().parents[1] / "prompts" / "README.md"
    assert SPLIT_LINE in readme.read_text(encoding="utf-8")
