"""What the kinds of run share: configuration, input records and their rejects, slots, the
requirement rules, the population driver (`Engine`) and synthetic streams."""
