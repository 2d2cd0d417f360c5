"""Views of the model: plain text, HTML for notebooks, the JSON document.

Views never parse bytes: they read :mod:`pte_lab.model` objects only.
"""
