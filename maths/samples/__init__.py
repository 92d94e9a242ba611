"""Repeated samples of one judge on one item: the named reducers that make them one answer."""
