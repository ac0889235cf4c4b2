"""AWS Neuron system and device profiles (JSON, Parquet, summary-text, NEFF/NTFF, neuron-ls) to tables."""
