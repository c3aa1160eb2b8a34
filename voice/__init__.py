"""Real-time voice assistant: session, turn-taking core, history, entry point."""
