import unittest

from stats.report import describe
from stats.summary import average, spread


class SummaryTest(unittest.TestCase):
    def test_average(self):
        self.assertEqual(average([2, 4]), 3)

    def test_average_of_nothing(self):
        self.assertIsNone(average([]))

    def test_spread(self):
        self.assertEqual(spread([5, 1, 3]), 4)
        self.assertIsNone(spread([]))

    def test_describe(self):
        self.assertEqual(describe([1, 3]), "mean 2.0, spread 2")
        self.assertEqual(describe([]), "no data")


if __name__ == "__main__":
    unittest.main()
