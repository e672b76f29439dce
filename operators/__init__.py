"""The mechanism: OBS, sampling, noise, dissimilarity, budget policies and the per-slot release.

Plain Python and numpy; the Flink functions in `pwevent.jobs` are thin hosts around these classes.
"""
