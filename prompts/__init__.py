"""Versioned judge prompt templates and their loader."""

from prompts.loader import PromptTemplate, load_template, template_names

__all__ = ["PromptTemplate", "load_template", "template_names"]
