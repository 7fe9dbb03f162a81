"""Project tools, not part of the lessons: the site builder, translations, the notebook runner,
the test contract, the saved lesson code and the portability check."""
