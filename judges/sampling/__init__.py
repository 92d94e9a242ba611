"""Repeated samples of an LLM judge (``samples: N`` in a panel): each sample its own call and
cache key, the judge's answer a named reducer over them (:mod:`juryflow.maths.samples`)."""
