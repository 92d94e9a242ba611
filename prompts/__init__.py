"""Versioned judge prompt templates and their loader."""

from juryflow.prompts.loader import PromptTemplate, load_template, template_names

__all__ = ["PromptTemplate", "load_template", "template_names"]
