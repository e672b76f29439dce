"""Assembling runs: the offline replay, the audit, the Flink job, evaluation and the command line."""
