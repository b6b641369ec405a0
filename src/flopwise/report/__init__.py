"""Rendering: rich tables for the terminal (and, later, HTML)."""
