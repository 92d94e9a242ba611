"""The maths of a panel, pure and vectorised, no I/O: the records judges produce, the named
consensus reducers, agreement, accuracy against gold, calibration, Dawid–Skene reliability
and regression statistics."""
