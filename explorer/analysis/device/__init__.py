"""A Neuron device profile's analysis: summary metrics, tracks, rows, sections, roofline, chains and advice."""
