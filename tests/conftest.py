"""Fixtures shared by every test."""
