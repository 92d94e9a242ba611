"""The judges' noise: what two judgings of the same items differ by when nothing changed."""
