"""warden: makes coding agents measurably cheaper."""

__version__ = "0.1.0"
