"""Test-session settings shared by every test file.

A cold call of a public verb (``round_to``, ``encode``, ``decode``) is served by
the numpy reference engine while a background process compiles its kernel
(``lowprec._kernels.route``; docs/kernels.md). In the suite that background
work would compete with pytest's workers for the cores and duplicate the
compiles the kernel tests do anyway, and the public verbs would be checked on
whichever engine happened to be ready. So the suite compiles in place
(``LOWPREC_COLD=compile``, inherited by the command-line and tutorial
subprocesses): every public-verb test runs the compiled twins, deterministically.
The cold path itself is tested where it is the subject: ``tests/test_route.py``
(the numpy engine bit-equal to the reference, and a fresh process with an empty
cache served without compiling) and ``tests/test_cli_warmup.py``. A value set
in the environment wins.
"""

import os

os.environ.setdefault("LOWPREC_COLD", "compile")
