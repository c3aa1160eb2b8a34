"""The server under attack (``python -m voice.bench fuzz``): the corpus and requests (pure), the attacks, the run."""
