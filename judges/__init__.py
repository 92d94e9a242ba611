"""Judges: the interface, panel files, providers (and their registry), offline detectors,
output parsing and span anchoring. The consensus and agreement maths is ``juryflow.maths``;
nothing in this package touches the database."""
