"""The trace model: columnar events, tracks, links, steps."""
