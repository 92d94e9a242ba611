"""Prefect flows and tasks, thin: they order the work and hand it to the layers below.

`evaluate` (one run), `regression` (a run against its baseline), `evaluate-sharded` and its
shards, `reaggregate`, the deployments of `serve`, the one judging task and the worker
processes of ``--workers``. No scoring logic lives here (see ARCHITECTURE.md).
"""
