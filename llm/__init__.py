"""The language model: one streaming interface, two backends."""
