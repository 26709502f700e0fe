import numpy as np
import pytest

import lowprec as lp


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_round_trip_of_every_code(fmt):
    f = lp.get_format(fmt)
    codes = np.arange(1 << f.width, dtype=f.code_dtype)
    values = lp.decode(codes, f)
    finite = ~np.isnan(values)
    again = lp.encode(values[finite], f)
    assert np.array_equal(again, codes[finite])
