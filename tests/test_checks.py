import pytest

from helpers.checks import whole_number


def test_whole_number_accepts_whole_values_at_or_above_the_minimum():
    assert whole_number(3, "n") == 3
    assert whole_number(3.0, "n") == 3 and isinstance(whole_number(3.0, "n"), int)
    assert whole_number(0, "r", 0) == 0


@pytest.mark.parametrize("value", [0, -1, 2.5, True, None, "3", float("nan")])
def test_whole_number_refuses_with_the_argument_its_value_and_meaning(value):
    with pytest.raises(ValueError) as error:
        whole_number(value, "batch_size", 1, "prompts per batch")
    assert str(error.value) == f"batch_size={value!r} must be a whole number >= 1 (prompts per batch)"


def test_whole_number_message_without_a_meaning():
    with pytest.raises(ValueError) as error:
        whole_number(1, "num_layers", 3)
    assert str(error.value) == "num_layers=1 must be a whole number >= 3"
