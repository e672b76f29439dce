"""Runs over files without Flink or Kafka: the replay and the spend-log auditor."""
