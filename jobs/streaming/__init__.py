"""The streaming job on Flink and Kafka: the job graph, its thin hosts, its settings, and the Kafka
tools (produce, tail)."""
