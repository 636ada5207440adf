"""The version of the delayq client."""

__version__ = "0.1.0"
