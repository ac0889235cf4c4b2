"""Native helpers below every layer: the C libraries' loader, the heap trim, an ingest process's memory rules."""
