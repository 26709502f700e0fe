"""The sub-commands of the ``lowprec`` command line, one module each (see ``lowprec.cli``)."""
