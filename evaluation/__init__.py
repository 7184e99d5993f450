"""`simulagents eval`: run agents on a test set through their real harness, score them with the official tools,
and report quality against latency (Table-1-shaped table, JSON/TSV, plot)."""
