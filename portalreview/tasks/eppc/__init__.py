"""EPPC coding: codes, subcodes and evidence spans per sentence (seed 003)."""
