"""Choosing a panel's consensus rule from human labels, by nested cross-validation.

- :mod:`~juryflow.maths.calibration.data`: a labelled run flattened onto one character axis,
  and what a rule predicts on it (vectorised);
- :mod:`~juryflow.maths.calibration.candidates`: the rules tried, each fitted on training
  items (counted votes, reliability weights, Dawid–Skene refitted on each run, stacking,
  best subsets, one judge alone);
- :mod:`~juryflow.maths.calibration.procedure`: the nested cross-validation that chooses
  and judges the choosing out of fold;
- :mod:`~juryflow.maths.calibration.judge_value`: what each judge adds (leave one out) and
  the cheapest subset within noise of the best.
"""
