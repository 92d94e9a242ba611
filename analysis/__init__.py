"""What a run's stored judgments say: the agreement report every face reads its numbers from,
a run's health and figures, calibration from labels, and adjudicated items as a dataset."""
