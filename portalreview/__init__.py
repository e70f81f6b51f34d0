"""PortalReview: annotate patient-portal messages and review LLM-drafted replies, offline."""

__version__ = "0.1.0"
