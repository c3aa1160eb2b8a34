"""Speech out: piper synthesis with word timings."""
