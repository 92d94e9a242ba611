"""The cache keys of a sampled judge's answers.

Sample 0 keeps the key a judge asked once has, so answers cached before a judge was sampled
serve as its first sample, and a judge sampled before serves a judge asked once. Sample k
has its own key, so a re-run finds every sample and a judge given more samples calls only
the new ones. The reduced answer has a key of its own, which no sample lookup ever finds: a
reduction is never served as a sample.
"""

from __future__ import annotations

import hashlib


def sample_cache_key(base: str, index: int) -> str:
    """The key of sample ``index`` of the answer whose single-call key is ``base``."""
    if index == 0:
        return base
    return hashlib.sha256(f"{base}|sample {index}".encode()).hexdigest()


def reduced_cache_key(base: str, samples: int, reducer: str) -> str:
    """The key stored with the reduced answer of ``samples`` samples by ``reducer``."""
    return hashlib.sha256(f"{base}|{reducer} of {samples} samples".encode()).hexdigest()
