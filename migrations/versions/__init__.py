"""Revisions, one file each, in order; released ones are never edited."""
