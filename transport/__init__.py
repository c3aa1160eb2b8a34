"""Where audio comes from and goes to: replay files, sound card, WebSocket."""
