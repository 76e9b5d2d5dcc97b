"""The schema both databases share: the models (:mod:`.models`), the statements (:mod:`.queries`) and the
revisions that build and move it (:mod:`.revisions`, over the Alembic scripts in ``migrations/``)."""
