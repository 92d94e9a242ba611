"""Everything a run decides before its first call: dataset, panel, keys and store
(`run_setup`), what it would cost (`dry_run`), and what ``--resume`` checks."""
