"""Chrome / Kineto trace JSON to tables: the decoder, the fast scanner and its C helpers."""
