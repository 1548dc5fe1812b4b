"""The tunelab version (one place; the package root and the store's provenance read it)."""
__version__ = "0.1.0"
