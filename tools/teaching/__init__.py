"""Serving the lessons to a class: ``make hub`` (JupyterHub on one server)."""
