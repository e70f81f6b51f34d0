"""empathy: which of two responses is more empathetic (seed 004)."""
