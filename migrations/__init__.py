"""Alembic script directory; a package only so that the wheel carries it as ``sessionstore.migrations``."""
