"""The autograder: run each student's submission, check the answers, report to the class.

``lowprec grade SUBMISSIONS... --tutorial NN`` (:mod:`lowprec.commands.grade`) calls
:func:`grade_submission` for each file and writes a CSV, one feedback file per student and
a summary (:mod:`lowprec.grading.report`).

How it works (details in the submodules):

* :mod:`~lowprec.grading.spec`: the exercises and their checks come from the *teacher's*
  tutorial (the packaged one, or the student's own variant of it), never from the
  submission;
* :mod:`~lowprec.grading.run`: the submission runs in its own sandbox
  (:mod:`~lowprec.grading._sandbox`: Linux user, mount, pid and network namespaces as an
  unprivileged user, resource limits; a weaker fallback, announced, where namespaces are
  unavailable), driven in lock-step by :mod:`~lowprec.grading._driver`; the answers are the
  values of the names each exercise's check reads, asked for right after the student's
  cell of that exercise;
* :mod:`~lowprec.grading.variants`: with a roster, each student's exercises use numbers
  drawn from the student id and a course seed.
"""

from .run import ExerciseResult, SubmissionResult, grade_submission, read_submission
from .spec import Check, Exercise, exercise_spec, open_tutorial

__all__ = [
    "Check",
    "Exercise",
    "ExerciseResult",
    "SubmissionResult",
    "exercise_spec",
    "grade_submission",
    "open_tutorial",
    "read_submission",
]
