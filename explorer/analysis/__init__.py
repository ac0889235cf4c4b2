"""Pure functions over a run's columns: nesting, op table, breakdown, compare, LOD. No I/O."""
