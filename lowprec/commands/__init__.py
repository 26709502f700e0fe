"""The ``lowprec`` sub-commands that live in their own modules (each has ``register`` and
``run``; :mod:`lowprec.cli` registers them)."""
