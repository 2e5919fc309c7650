"""Unit tests of model.py (stdlib only: run with `python3 -m unittest` in this folder)."""

import json
import os
import tempfile
import unittest

from model import Features, Model, Sample, majority_currency, train


def sample(category: str, region: str, price: int, **attributes: str) -> Sample:
    return Sample(Features(category, region, dict(attributes)), price)


# bikes: 3 in Moscow (100, 110, 120), 2 in Kazan (50, 70); cars: 1 (1000).
SAMPLES = [
    sample("bikes", "Moscow", 100, colour="red"),
    sample("bikes", "Moscow", 110, colour="red"),
    sample("bikes", "Moscow", 120, colour="red"),
    sample("bikes", "Kazan", 50),
    sample("bikes", "Kazan", 70),
    sample("cars", "Moscow", 1000),
]


class PredictTest(unittest.TestCase):
    def setUp(self) -> None:
        self.model = Model(train(SAMPLES, "RUB"))

    def test_category_and_region_with_enough_offers(self) -> None:
        p = self.model.predict(Features("bikes", "Moscow"))
        self.assertEqual((p.price_minor, p.basis, p.samples, p.currency),
                         (110, "category+region", 3, "RUB"))
        self.assertAlmostEqual(p.confidence, 0.5)

    def test_falls_back_to_category_when_the_region_has_too_few(self) -> None:
        p = self.model.predict(Features("bikes", "Kazan"))
        self.assertEqual((p.price_minor, p.basis, p.samples), (100, "category", 5))
        self.assertEqual(p.confidence, round(0.7 * 5 / 8, 3))

    def test_falls_back_to_global_for_a_thin_or_unknown_category(self) -> None:
        for f in (Features("cars", "Moscow"), Features("boats", ""), Features("", "")):
            p = self.model.predict(f)
            self.assertEqual((p.price_minor, p.basis, p.samples), (105, "global", 6), f)
            self.assertEqual(p.confidence, round(0.3 * 6 / 9, 3))

    def test_a_specific_basis_is_more_confident(self) -> None:
        region = self.model.predict(Features("bikes", "Moscow")).confidence
        category = self.model.predict(Features("bikes", "Kazan")).confidence
        glob = self.model.predict(Features("boats", "Moscow")).confidence
        self.assertGreater(region, category)
        self.assertGreater(category, glob)

    def test_attributes_seen_often_enough_scale_the_median(self) -> None:
        # red bikes cost 110 of a category median of 100: factor 1.1.
        plain = self.model.predict(Features("bikes", "Kazan"))
        red = self.model.predict(Features("bikes", "Kazan", {"colour": "red"}))
        self.assertEqual((plain.price_minor, red.price_minor), (100, 110))
        # An attribute value never seen (or seen too rarely) changes nothing.
        blue = self.model.predict(Features("bikes", "Kazan", {"colour": "blue"}))
        self.assertEqual(blue.price_minor, 100)

    def test_attributes_do_not_apply_to_the_global_median(self) -> None:
        p = self.model.predict(Features("boats", "Moscow", {"colour": "red"}))
        self.assertEqual(p.price_minor, 105)


class TableTest(unittest.TestCase):
    def test_version_follows_the_content(self) -> None:
        a = train(SAMPLES, "RUB")
        self.assertEqual(a["version"], train(list(SAMPLES), "RUB")["version"])
        self.assertNotEqual(a["version"], train(SAMPLES + [sample("cars", "Kazan", 9)], "RUB")["version"])

    def test_round_trips_through_its_json_file(self) -> None:
        table = train(SAMPLES, "RUB")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(table, f)
            loaded = Model.load(path)
        f = Features("bikes", "Moscow", {"colour": "red"})
        self.assertEqual(loaded.predict(f), Model(table).predict(f))
        self.assertEqual(loaded.version, table["version"])
        # What the server's model_samples and model_categories metrics show.
        self.assertEqual((loaded.samples, loaded.categories), (6, 2))

    def test_refuses_no_samples_and_an_unknown_format(self) -> None:
        with self.assertRaisesRegex(ValueError, "no priced offers"):
            train([], "RUB")
        table = train(SAMPLES, "RUB")
        table["format"] = 99
        with self.assertRaisesRegex(ValueError, "retrain"):
            Model(table)

    def test_majority_currency(self) -> None:
        self.assertEqual(majority_currency(["USD", "RUB", "RUB"]), "RUB")
        self.assertEqual(majority_currency(["USD", "RUB"]), "RUB")


class DigestTest(unittest.TestCase):
    def test_equal_inputs_equal_digest_whatever_the_attribute_order(self) -> None:
        a = Features("bikes", "Moscow", {"colour": "red", "size": "L"})
        b = Features("bikes", "Moscow", {"size": "L", "colour": "red"})
        self.assertEqual(a.digest(), b.digest())

    def test_any_input_change_changes_the_digest(self) -> None:
        base = Features("bikes", "Moscow", {"colour": "red"})
        for other in (Features("cars", "Moscow", {"colour": "red"}),
                      Features("bikes", "Kazan", {"colour": "red"}),
                      Features("bikes", "Moscow", {"colour": "blue"}),
                      Features("bikes", "Moscow")):
            self.assertNotEqual(base.digest(), other.digest(), other)


if __name__ == "__main__":
    unittest.main()
