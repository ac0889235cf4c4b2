"""Bytes -> model: format detection, one parser per format, and the shared TraceBuilder."""
