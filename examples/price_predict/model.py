"""The price model of the price.predict stage: a table of median prices, no dependencies.

A prediction is the median price of the most specific cell with enough training offers
(category+region, else category, else every offer), times the median price ratio of each of
the offer's attributes (key=value) seen often enough in its category. The model is a JSON
file written by train.py and read by server.py; its version is a digest of its content, so a
retrained model is a new version.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

FORMAT = 1
MIN_SAMPLES = 3  # a cell or an attribute with fewer training offers is not used
# How much a median of each basis is worth before its sample count is taken into account.
BASIS_WEIGHT = {"category+region": 1.0, "category": 0.7, "global": 0.3}
FACTOR_RANGE = (0.2, 5.0)  # the attributes' combined factor is clamped to this


@dataclass(frozen=True)
class Features:
    """What a prediction depends on: the stage's inputs, taken from the offer."""

    category: str
    region: str
    attributes: dict[str, str] = field(default_factory=dict)

    def digest(self) -> str:
        """A stable key of the inputs: equal inputs, equal digest (the stage's idempotency)."""
        text = json.dumps([self.category, self.region, sorted(self.attributes.items())])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Sample:
    """One training offer: its features and its price in minor units."""

    features: Features
    price_minor: int


@dataclass(frozen=True)
class Prediction:
    price_minor: int
    currency: str
    confidence: float
    basis: str
    samples: int


def _cell(prices: list[int]) -> dict:
    return {"median": statistics.median(prices), "n": len(prices)}


def train(samples: list[Sample], currency: str) -> dict:
    """The model's table from priced training offers (all in `currency`)."""
    if not samples:
        raise ValueError("no priced offers to train on: the model needs at least one")
    by_category: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by_category[s.features.category].append(s)

    categories = {}
    for category, rows in sorted(by_category.items()):
        median = statistics.median(r.price_minor for r in rows)
        by_region: dict[str, list[int]] = defaultdict(list)
        ratios: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            by_region[r.features.region].append(r.price_minor)
            for k, v in r.features.attributes.items():
                ratios[f"{k}={v}"].append(r.price_minor / median if median else 1.0)
        categories[category] = {
            **_cell([r.price_minor for r in rows]),
            "regions": {reg: _cell(p) for reg, p in sorted(by_region.items())},
            "attributes": {
                a: {"ratio": statistics.median(x), "n": len(x)}
                for a, x in sorted(ratios.items())
                if len(x) >= MIN_SAMPLES
            },
        }
    table = {
        "format": FORMAT,
        "currency": currency,
        "min_samples": MIN_SAMPLES,
        "global": _cell([s.price_minor for s in samples]),
        "categories": categories,
    }
    table["version"] = version_of(table)
    return table


def version_of(table: dict) -> str:
    body = {k: v for k, v in table.items() if k != "version"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


def majority_currency(currencies: list[str]) -> str:
    """The currency most training offers are priced in (ties: the first in name order)."""
    counts = Counter(currencies)
    return min(counts, key=lambda c: (-counts[c], c))


class Model:
    def __init__(self, table: dict) -> None:
        if table.get("format") != FORMAT:
            raise ValueError(f"model format {table.get('format')!r}, expected {FORMAT}: retrain "
                             "with this version's train.py")
        self.table = table
        self.version: str = table["version"]
        self.currency: str = table["currency"]
        self.min_samples: int = table["min_samples"]
        self.samples: int = table["global"]["n"]  # the priced offers it was trained on
        self.categories: int = len(table["categories"])

    @classmethod
    def load(cls, path: str) -> Model:
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def predict(self, f: Features) -> Prediction:
        cat = self.table["categories"].get(f.category)
        region = cat["regions"].get(f.region) if cat else None
        if region and region["n"] >= self.min_samples:
            basis, cell = "category+region", region
        elif cat and cat["n"] >= self.min_samples:
            basis, cell = "category", cat
        else:
            basis, cell = "global", self.table["global"]

        factor = 1.0
        if cat and basis != "global":
            for k, v in sorted(f.attributes.items()):
                attr = cat["attributes"].get(f"{k}={v}")
                if attr:
                    factor *= attr["ratio"]
        factor = min(max(factor, FACTOR_RANGE[0]), FACTOR_RANGE[1])

        n = cell["n"]
        # More offers behind the median, and a more specific one, is worth more; a cell of
        # min_samples offers gets half its basis' weight.
        confidence = BASIS_WEIGHT[basis] * n / (n + self.min_samples)
        return Prediction(
            price_minor=round(cell["median"] * factor),
            currency=self.currency,
            confidence=round(confidence, 3),
            basis=basis,
            samples=n,
        )
