"""Offline hallucination detectors: no network, no model weights."""
