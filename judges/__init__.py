"""Judges: the interface, providers, output parsing, span anchoring and the pure consensus /
agreement maths. Nothing in this package touches the database."""
