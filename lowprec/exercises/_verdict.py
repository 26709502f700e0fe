"""A checker's verdict, written as the table of mistakes it recognises.

Every checker ends the same way: if the answer is right it prints why; if not it says
what the student answered, what the right answer is and why, and -- when the wrong
answer is one that a known mistake produces -- names that mistake. :func:`verdict`
does this ending, so a checker reads as its list of :class:`Mistake` rows::

    verdict(x == f.max,
            said=f"your {f.name} max is {x}", solution=f"the largest finite ... is ...",
            mistakes=[Mistake(x == 2**f.width - 1, "That is the largest unsigned integer."),
                      Mistake(math.isinf(x), "Infinity is not finite.")])

The rows are tried in order and the first whose ``when`` holds is reported. A row's
``diagnosis`` says what went wrong, its ``hint`` (optional) how to go on; the
``solution`` is kept apart from both, so that feedback can show a diagnosis and a hint
without giving the answer away: the :class:`ExerciseError` raised keeps the three parts
(``said`` as its ``diagnosis``, the matching row's text as its ``hint``, the
``solution``), and ``feedback()`` shows the solution only with ``reveal=True``.

>>> verdict(False, said="you said 3", solution="it is 4",
...         mistakes=[Mistake(False, "Never shown."), Mistake(True, "Off by one.", "Count again.")])
Traceback (most recent call last):
...
lowprec.exercises.ExerciseError: you said 3, but it is 4. Off by one. Count again.

>>> try:
...     verdict(False, said="you said 3", solution="it is 4",
...             mistakes=[Mistake(True, "Off by one.", "Count again.")])
... except ExerciseError as err:
...     print(err.feedback()); print(err.feedback(reveal=True))
you said 3: that is not right. Off by one. Count again.
you said 3, but it is 4. Off by one. Count again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._common import ExerciseError, _ok

__all__ = ["Mistake", "verdict"]


@dataclass(frozen=True)
class Mistake:
    """One row of a checker's table: a condition on the answer and what it means.

    Parameters
    ----------
    when:
        True when the student's answer is the one this mistake produces.
    diagnosis:
        What went wrong, in a sentence ("You forgot to subtract the bias.").
    hint:
        Optionally, a nudge towards the right answer that does not give it away.

    >>> Mistake(True, "The bias is off by one.", "Count from 1 - bias.").text()
    'The bias is off by one. Count from 1 - bias.'
    """

    when: bool
    diagnosis: str
    hint: str = ""

    def text(self) -> str:
        """The diagnosis and the hint, as one piece of feedback."""
        return " ".join(part for part in (self.diagnosis, self.hint) if part)


def diagnose(mistakes: Sequence[Mistake]) -> Mistake | None:
    """The first row of ``mistakes`` whose condition holds, or None.

    >>> diagnose([Mistake(False, "a"), Mistake(True, "b"), Mistake(True, "c")]).diagnosis
    'b'
    """
    return next((m for m in mistakes if m.when), None)


def verdict(correct: bool, *, said: str, solution: str = "", right: str | None = None,
            but: str = ", but ", mistakes: Sequence[Mistake] = ()) -> None:
    """Print ``Correct: <right>``, or raise :class:`ExerciseError` explaining the answer.

    ``right`` defaults to the solution: ``Correct: <solution>.``. The error message is
    ``<said><but><solution>.`` followed by the text of the first matching row of
    ``mistakes`` (nothing when none matches); without a ``solution`` it is ``<said>.``
    and the row. The error keeps ``said`` (its ``diagnosis``), the row's text (its
    ``hint``) and ``solution`` apart, so a grader can leave the solution out.

    >>> verdict(True, said="you said 4", solution="4 is the answer")
    Correct: 4 is the answer.
    """
    if correct:
        _ok(f"{solution}." if right is None else right)
        return
    message = f"{said}{but}{solution}." if solution else f"{said}."
    found = diagnose(mistakes)
    hint = "" if found is None else found.text()
    raise ExerciseError(f"{message} {hint}" if hint else message, diagnosis=said, hint=hint,
                        solution=solution)
