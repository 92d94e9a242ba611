"""JSON and YAML from outside juryflow (a user's files and queries, a server's answers),
parsed within limits: :mod:`juryflow.judges.untrusted.loading`."""
