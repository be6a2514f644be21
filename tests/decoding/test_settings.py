"""minitrans.decoding.settings: the decoding settings every face checks the same way."""

import math

import pytest

from minitrans.decoding.settings import DEFAULT_ALPHA, DEFAULT_BEAM, check_decoding, nbest_fits
from minitrans.errors import UsageError


def test_the_defaults_pass_their_own_check():
    check_decoding(DEFAULT_BEAM, DEFAULT_ALPHA, nbest=DEFAULT_BEAM)


@pytest.mark.parametrize(("beam", "alpha", "nbest", "flag"), [
    (0, 1.0, 1, "--beam"), (True, 1.0, 1, "--beam"), (2.0, 1.0, 1, "--beam"),
    (3, 1.0, 4, "--nbest"), (3, 1.0, 0, "--nbest"), (3, 1.0, True, "--nbest"),
    (3, -0.1, 1, "--alpha"), (3, math.nan, 1, "--alpha"), (3, 11, 1, "--alpha"), (3, "1", 1, "--alpha"),
])
def test_settings_that_cannot_give_a_right_answer_are_refused_naming_the_flag(beam, alpha, nbest, flag):
    with pytest.raises(UsageError, match=f"^{flag}"):
        check_decoding(beam, alpha, nbest)


def test_the_nbest_bound_is_one_to_the_beam():
    assert [n for n in range(-1, 7) if nbest_fits(n, 4)] == [1, 2, 3, 4]
