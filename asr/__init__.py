"""Speech in: voice activity detection and streaming recognition."""
