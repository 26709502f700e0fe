"""The examples in the docstrings of the scaled-format modules run and are right."""

from __future__ import annotations

import doctest

import pytest

from lowprec import mx, nvfp4, quant_error, scaling


@pytest.mark.parametrize("module", [mx, nvfp4, scaling, quant_error])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
