"""The timeline index: levels of detail, track layout and the Python-frame fold, pure functions over columns."""
