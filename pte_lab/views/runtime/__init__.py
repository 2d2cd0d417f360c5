"""Views of what the runtime measured: a sizing (text, HTML, C header, the example runner), the declared sizes of
methods it could not run, a loaded program's memory report, the installation and an emulated device.

:mod:`pte_lab.views` holds the views of the file's model; these render the runtime's records (they import
the runtime's results, never the reverse: the runtime reaches them only through its records' display
hooks, ``_repr_html_``, ``__repr__`` and ``to_dict``)."""
