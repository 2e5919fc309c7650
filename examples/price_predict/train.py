"""Trains the price.predict model on the offers in gost's store and writes it as JSON.

    VENV/bin/python train.py --dsn "host=127.0.0.1 port=5432 user=gost dbname=gost" --out model.json

It reads every offer from PostgreSQL (the `offers` table: `body` is a serialized gost.v1.Offer)
rather than through OfferService.ListOffers, which lists one seller's offers at a time: the
model wants all sellers' offers, and a batch read (of a replica, in production) does not go
through the nodes' offer actors. Offers without a price, deleted or banned ones, and those in a
currency other than the majority's are left out (counted in the log line).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import psycopg
from gost.v1 import offer_pb2

import model

log = logging.getLogger("price.train")
LEFT_OUT = (offer_pb2.OFFER_STATUS_DELETED, offer_pb2.OFFER_STATUS_BANNED)


def read_offers(dsn: str) -> list[offer_pb2.Offer]:
    offers = []
    with psycopg.connect(dsn) as conn, conn.cursor(name="offers") as cur:  # server-side cursor
        cur.execute("SELECT body FROM offers")
        for (body,) in cur:
            offers.append(offer_pb2.Offer.FromString(body))
    return offers


def samples_of(offers: list[offer_pb2.Offer]) -> tuple[list[model.Sample], str, int]:
    """The training samples, their currency, and how many offers were left out."""
    priced = [o for o in offers if o.price.amount_minor > 0 and o.status not in LEFT_OUT]
    if not priced:
        raise ValueError(f"none of the {len(offers)} offers has a price: nothing to train on")
    currency = model.majority_currency([o.price.currency for o in priced])
    samples = [
        model.Sample(model.Features(o.category, o.address.region, dict(o.attributes)),
                     o.price.amount_minor)
        for o in priced if o.price.currency == currency
    ]
    return samples, currency, len(offers) - len(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", required=True, help="libpq connection string of gost's database")
    ap.add_argument("--out", required=True, help="the model file to write")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s level=%(levelname)s logger=%(name)s %(message)s")
    try:
        offers = read_offers(args.dsn)
        samples, currency, left_out = samples_of(offers)
    except (psycopg.Error, ValueError) as e:
        log.error("cannot train error=%r", e)
        return 1
    table = model.train(samples, currency)
    tmp = f"{args.out}.tmp"  # a server loading the file never sees half of it
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    os.replace(tmp, args.out)
    log.info("trained path=%s version=%s currency=%s samples=%d left_out=%d categories=%d",
             args.out, table["version"], currency, len(samples), left_out,
             len(table["categories"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
