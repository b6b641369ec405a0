"""Typed, validated, immutable descriptions of what flopwise reasons about."""
