"""Pairwise judging: a judge sees two answers for one item, asked in both orders, and says
which is better. The pure maths (no I/O): verdict codes and consistency across orders
(:mod:`.records`), position flips, position bias and agreement (:mod:`.position`), the
named panel rules (:mod:`.rules`), Bradley–Terry strengths with a position term
(:mod:`.bradley_terry`) and candidate-against-baseline figures (:mod:`.head_to_head`)."""
