"""Prefect flows and the command line: thin wiring, no scoring logic."""
