"""Reporting: terminal lines (and, later, JSON and HTML)."""
