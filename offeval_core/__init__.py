"""offeval_core: offline evaluation of ranking and recommendation policies against online A/B tests."""

__version__ = "0.1.0"
