from metrics.series import Series


def test_mean():
    assert Series([2, 4, 6]).mean() == 4


def test_moving_average():
    assert Series([1, 2, 3, 4]).moving_average(2) == [1.5, 2.5, 3.5]


def test_moving_average_over_the_whole_series():
    assert Series([3, 6, 9]).moving_average(3) == [6]


def test_peak_window_at_the_end():
    assert Series([1, 1, 5, 9]).peak_window(2) == 2
