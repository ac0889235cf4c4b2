"""Plain types of the explorer: lanes, table schemas, run summaries. No I/O here."""
