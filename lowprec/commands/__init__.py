"""Sub-commands of the ``lowprec`` command line, one module each (``register`` + ``run``)."""
