"""The vector files the Python reference and the JVM share (tests/streaming/data/), one module per
file, each with its file's `NAME` and `text()`, the text the reference writes now. Written by
`python -m tests.streaming.write_vectors`, never by hand."""
