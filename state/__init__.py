"""What lives between slots: requirements, per-user spend ledgers, ledger classes, release history.

Pure Python and numpy; nothing here imports Flink or Kafka.
"""
