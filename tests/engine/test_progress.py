from dedup_tui.engine.progress import describe_duration, describe_rate


def test_rate_elapsed_and_time_left():
    assert describe_rate(250_000, 1_000_000, 10.0) == "25,000/s  0:10  ~30 s left"
    assert describe_rate(100, 1_000_000, 30.0) == "3/s  0:30  ~83.3 h left"
    assert describe_rate(1_000, 10_000, 75.0) == "13/s  1:15  ~11 min left"  # a long stage says so
    assert describe_rate(100, 200, 70.0) == "1/s  1:10  ~70 s left"  # under 90 s: in seconds


def test_durations_are_rounded_to_their_unit():
    assert [describe_duration(s) for s in (0.4, 89, 90, 5399, 5400, 9000)] == [
        "0 s",
        "89 s",
        "2 min",
        "90 min",
        "1.5 h",
        "2.5 h",
    ]


def test_no_rate_or_time_left_before_they_mean_something():
    # at a stage's start: no absurd rate from a tiny elapsed time
    assert describe_rate(5_000_000, 10_000_000, 0.001) == "0:00"
    assert describe_rate(0, 10, 5.0) == "0:05"
    assert describe_rate(10, 10, 5.0) == "2/s  0:05"  # done: no time left
