"""headstart: a real-time voice assistant that starts its reply while the user is still talking."""

__version__ = "0.1.0"
