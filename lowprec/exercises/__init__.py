"""Checking functions for the tutorials' exercises, with specific feedback.

Each ``check_*`` function takes the student's answer, prints a line starting
with ``Correct:`` when it is right, and otherwise raises :class:`ExerciseError`
(an ``AssertionError``) whose message says what the answer is, what the right
answer is, and *why* -- naming the usual mistake when the answer matches one::

    >>> check_fp16_max(65504)  # doctest: +ELLIPSIS
    Correct: the largest finite fp16 is 65504, because the all-ones exponent field (31) ...
    >>> check_fp16_max(65535)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lowprec.exercises.ExerciseError: your fp16 max is 65535, but the largest finite fp16 is 65504 ...

Expected values are computed by lowprec itself (formats, ``round_to``,
``decode``), never typed in, so a check is exactly as right as the emulator
that the tests hold bit for bit against numpy, ml_dtypes and Fraction
arithmetic.

One module per tutorial (``t01_anatomy`` ... ``t13_nvfp4_recipe``); every name is
re-exported here, so ``lowprec.exercises.check_max`` is the import path to use.
"""

from ._common import ExerciseError
from .t01_anatomy import (
    check_decode,
    check_fp16_max,
    check_max,
    check_num_finite,
    check_smallest_normal,
    check_smallest_subnormal,
    check_spacing,
)
from .t02_rounding import check_double_rounding, check_rounding, check_stochastic_probability
from .t03_gradient_underflow import check_largest_flushed, check_underflow_fraction
from .t04_loss_scaling import check_grad_scaler_scale, check_smallest_loss_scale
from .t05_master_weights import check_largest_lost_increment, check_steps_until_visible
from .t06_bf16_vs_fp16 import check_unit_roundoff
from .t07_fp8_scaling import check_current_scale, check_delayed_scale
from .t08_mx_nvfp4 import check_bits_per_value, check_mx_scale
from .t09_accumulation import check_accumulator_spacing, check_sequential_sum
from .t10_gpu_validation import check_device_mode, check_ulp_distance
from .t11_your_own_model import check_block_flush_share, check_underflow_count
from .t12_qat import check_bytes_per_param
from .t13_nvfp4_recipe import check_rht_amax, check_sr8_probability

__all__ = [
    "ExerciseError",
    "check_accumulator_spacing",
    "check_bits_per_value",
    "check_block_flush_share",
    "check_bytes_per_param",
    "check_current_scale",
    "check_decode",
    "check_delayed_scale",
    "check_device_mode",
    "check_double_rounding",
    "check_fp16_max",
    "check_grad_scaler_scale",
    "check_largest_flushed",
    "check_largest_lost_increment",
    "check_max",
    "check_mx_scale",
    "check_num_finite",
    "check_rht_amax",
    "check_rounding",
    "check_sequential_sum",
    "check_smallest_loss_scale",
    "check_smallest_normal",
    "check_smallest_subnormal",
    "check_spacing",
    "check_sr8_probability",
    "check_steps_until_visible",
    "check_stochastic_probability",
    "check_ulp_distance",
    "check_underflow_count",
    "check_underflow_fraction",
    "check_unit_roundoff",
]
