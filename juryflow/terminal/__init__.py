"""How juryflow looks in a terminal: tables, CSV and JSON, the run summary, live progress."""
