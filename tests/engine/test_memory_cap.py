import pytest

from dedup_tui.engine.scanning.memory import MIN_CAP, SizeError, default_cap, format_size, parse_size


@pytest.mark.parametrize(
    "text,expected",
    [("3G", 3 << 30), ("500MB", 500 << 20), ("2.5GiB", int(2.5 * (1 << 30))), ("1048576", 1 << 20), (" 4 k ", 4096)],
)
def test_sizes_as_people_write_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "3X", "-1G", "three"])
def test_a_size_that_is_not_one_is_refused(text):
    with pytest.raises(SizeError, match="not a size"):
        parse_size(text)


def test_sizes_read_back_and_the_default_is_usable():
    assert format_size(3 << 30) == "3.0 GB"
    assert format_size(730 << 20) == "730 MB"
    assert default_cap() >= MIN_CAP
