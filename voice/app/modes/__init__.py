"""The three ways ``python -m voice.run`` runs: replay a file, the desk (the sound card), the server."""
