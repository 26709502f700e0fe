"""Suggest the closest valid names when a user mistypes one (formats, modes, presets, ...).

Each module that owns a set of names (`lowprec.formats`, `lowprec.rounding`,
`lowprec.train.policy`, ...) calls :func:`did_you_mean` when it refuses one, so the
Python API and the command line give the same hint.

>>> did_you_mean("fp8", ["fp32", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
' (did you mean fp8_e4m3 or fp8_e5m2?)'
>>> did_you_mean("zzz", ["fp32", "fp16"])
''
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "did_you_mean"]


def closest(name: object, choices: Iterable[str], n: int = 2) -> list[str]:
    """Up to ``n`` of ``choices`` that look most like ``name``, best first.

    Similarity is difflib's ratio, with a bonus for choices that start with what was
    typed (``fp8`` -> ``fp8_e4m3``); ties keep the order of ``choices``, so a registry
    listed most-used first suggests its most-used names first. Choices far behind the
    best match are left out.

    >>> closest("nearst", ["rne", "nearest", "nearest_even"])
    ['nearest']
    """
    typed = str(name).strip().lower()
    if not typed:
        return []
    scored = []
    for index, choice in enumerate(dict.fromkeys(choices)):  # unique, in order
        score = difflib.SequenceMatcher(None, typed, choice.lower()).ratio()
        if choice.lower().startswith(typed) or typed.startswith(choice.lower()):
            score += 0.2
        if score >= 0.6:
            scored.append((-score, index, choice))
    scored.sort()
    best = -scored[0][0] if scored else 0.0
    return [choice for score, _, choice in scored[:n] if -score >= best - 0.15]  # near the best


def did_you_mean(name: object, choices: Iterable[str], n: int = 2) -> str:
    """``" (did you mean a or b?)"`` for the closest ``choices`` to ``name``, else ``""``."""
    found = closest(name, choices, n)
    if not found:
        return ""
    return " (did you mean " + " or ".join([", ".join(found[:-1]), found[-1]] if len(found) > 1
                                           else found) + "?)"
