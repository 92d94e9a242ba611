"""The static HTML report of one run (`juryflow report`, and the nightly regression flow's
report artifact)."""
