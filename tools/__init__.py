"""Project tools that are not part of the ``utils`` package (the teaching-site builder)."""
