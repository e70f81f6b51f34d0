"""Fact checks of an edited response: facts, entailment both ways, error categories (seed 004)."""
