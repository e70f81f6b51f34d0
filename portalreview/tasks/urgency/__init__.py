"""urgency: which of two patients needs care first (seed 002), and the inbox they sort."""
