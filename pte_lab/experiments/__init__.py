"""Experiments that reproduce published measurements: see :mod:`.device_placement`."""
