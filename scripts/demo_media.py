"""The media side of scripts/run.sh's demo: photos and videos on a local HTTP server, the
offers that show them, and the summary of what the stages made of them. Not a command of its
own: run.sh calls it (system python3, stdlib only; `vips` for the photos).

    demo_media.py media DIR             writes the demo's photos and videos into DIR
    demo_media.py serve DIR PORT_FILE   serves DIR on 127.0.0.1 (a free port, written to PORT_FILE)
    demo_media.py offers BASE_URL STAMP the demo's offers (gost.v1.Offer JSON), one a line
    demo_media.py seed-model OUT        price.predict's model trained on those offers
    demo_media.py progress GOSTCTL... -- ID...
                                        one line: how far the stages are on offers ID...
    demo_media.py summary PRICE_LOG GOSTCTL... -- ID...
                                        the summary's lines about those offers
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import struct
import subprocess
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Photos: file -> (width, height, colour), made with vips. The sizes differ so that
# photos.ratio_color has something to tell; `bike-sideways.jpg` says in its EXIF that it is
# turned (orientation 6), so photos.orientation rotates it upright; `missing.jpg` is never
# written (the server answers 404) and `not-an-image.jpg` is text.
PHOTOS = {
    "bike-sideways.jpg": (120, 160, "120 120 200"),
    "bike-red.jpg": (160, 120, "200 40 40"),
    "bike-blue.jpg": (160, 120, "40 60 200"),
    "bike-side.png": (200, 100, "30 150 60"),
    "bike-tall.jpg": (90, 160, "230 200 40"),
    "phone.jpg": (60, 120, "20 20 20"),
    "phone-back.png": (60, 120, "180 180 190"),
}
VIDEOS = ("bike.mp4", "phone.mp4")  # `gone.mp4` is never written: 404

# (category, region, attributes, price in roubles, title, photos, videos)
CATALOGUE = [
    ("bikes", "Moscow", {"colour": "red"}, 15000, "Велосипед", ["bike-red.jpg", "bike-side.png"],
     ["bike.mp4"]),
    ("bikes", "Moscow", {"colour": "blue"}, 13500, "Велосипед горный", ["bike-blue.jpg"], []),
    ("bikes", "Moscow", {"colour": "red"}, 16000, "Велосипед складной",
     ["bike-tall.jpg", "missing.jpg"], ["gone.mp4"]),
    ("bikes", "Kazan", {"colour": "red"}, 12000, "Велосипед детский",
     ["bike-red.jpg", "bike-sideways.jpg"], ["bike.mp4"]),
    ("phones", "Moscow", {"memory": "128"}, 30000, "Смартфон", ["phone.jpg"], ["phone.mp4"]),
    ("phones", "Moscow", {"memory": "256"}, 36000, "Смартфон Pro",
     ["phone-back.png", "not-an-image.jpg"], []),
    ("phones", "Kazan", {"memory": "128"}, 27000, "Смартфон б/у", ["phone.jpg"],
     ["phone.mp4", "gone.mp4"]),
    ("phones", "Kazan", {"memory": "128"}, 28000, "Смартфон с чехлом", [], ["phone.mp4"]),
]


def with_orientation(jpeg: bytes, orientation: int) -> bytes:
    """`jpeg` with an EXIF segment holding only the orientation tag (0x0112), after its JFIF
    segment."""
    tiff = (b"MM\x00\x2a" + struct.pack(">IH", 8, 1)
            + struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0))
    payload = b"Exif\x00\x00" + tiff
    app1 = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    at = 2
    if jpeg[2:4] == b"\xff\xe0":  # APP0 (JFIF) stays first
        at = 4 + struct.unpack(">H", jpeg[4:6])[0]
    return jpeg[:at] + app1 + jpeg[at:]


def media(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    for name, (w, h, rgb) in PHOTOS.items():
        path = os.path.join(out, name)
        if os.path.exists(path):
            continue
        tmp = os.path.join(out, "tmp-" + name)
        # A solid colour: black of the size, then each band times 1 plus the colour.
        subprocess.run(["vips", "black", tmp + ".v", str(w), str(h), "--bands", "3"], check=True)
        subprocess.run(["vips", "linear", tmp + ".v", tmp, "1 1 1", rgb, "--uchar"], check=True)
        os.remove(tmp + ".v")
        if name == "bike-sideways.jpg":
            with open(tmp, "rb") as f:
                data = with_orientation(f.read(), 6)
            with open(tmp, "wb") as f:
                f.write(data)
        os.replace(tmp, path)
    with open(os.path.join(out, "not-an-image.jpg"), "w", encoding="utf-8") as f:
        f.write("this is text, not a JPEG\n")
    for name in VIDEOS:  # bytes with a video name: video.check asks HEAD and 1 KiB, no more
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"\x00\x00\x00\x18ftypmp42" + bytes(4096))
    return 0


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt: str, *args: object) -> None:  # one line a request, to stderr
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))


def serve(directory: str, port_file: str) -> int:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=directory))
    tmp = port_file + ".tmp"  # written whole: a reader never sees half a number
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{server.server_address[1]}\n")
    os.replace(tmp, port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def offers(base: str, stamp: str) -> int:
    for i, (cat, region, attrs, rub, title, photos, videos) in enumerate(CATALOGUE):
        print(json.dumps({
            "category": cat, "address": {"region": region}, "attributes": attrs,
            "title": title, "price": {"amountMinor": str(rub * 100), "currency": "RUB"},
            "status": "OFFER_STATUS_ACTIVE",
            "photos": [{"url": f"{base}/{p}", "order": n + 1} for n, p in enumerate(photos)],
            "videos": [{"url": f"{base}/{v}"} for v in videos],
            "sellerId": "demo-media", "namespace": "demo", "externalId": f"media-{i}-{stamp}",
        }, ensure_ascii=False))
    return 0


def seed_model(out: str) -> int:
    sys.path.insert(0, os.path.join(ROOT, "examples", "price_predict"))
    import model  # examples/price_predict/model.py: the stage's own training

    samples = [model.Sample(model.Features(c, r, a), rub * 100)
               for c, r, a, rub, *_ in CATALOGUE]
    table = model.train(samples, "RUB")
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    os.replace(out + ".tmp", out)
    return 0


def inspect(gostctl: list[str], offer_id: str) -> tuple[dict, dict]:
    """The offer (JSON) and its decoded stage states by stage id, as `gostctl offer` shows them."""
    text = subprocess.run(gostctl + ["offer", offer_id], check=True, capture_output=True,
                          text=True).stdout
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l == "{")
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    offer = json.loads("\n".join(lines[start:end + 1]))
    states = {}
    section = lines.index("stage states:")
    for line in lines[section + 1:]:
        m = re.match(r"^  (\S+) v\d+\s+(\{.*\})$", line)
        if not line.strip():
            break
        if m:
            states[m.group(1)] = json.loads(m.group(2))
    return offer, states


PHOTO_STAGES = ("photos.download", "photos.ratio_color", "photos.orientation")


def tally(gostctl: list[str], ids: list[str]) -> dict:
    """Per photo stage, the offers with photos whose photos are all final; per video status,
    the videos; and the photo statuses photos.download found."""
    t: Counter = Counter()
    for offer_id in ids:
        offer, states = inspect(gostctl, offer_id)
        photos = len(offer.get("photos", []))
        if photos:
            t["photo_offers"] += 1
            for stage in PHOTO_STAGES:
                s = states.get(stage)
                if s and len(s.get("photos", [])) == photos and not s.get("pending"):
                    t[stage] += 1
            for p in states.get("photos.download", {}).get("photos", []):
                t["photo " + p.get("status", "PHOTO_STATUS_UNSPECIFIED")] += 1
                if p.get("error_kind"):
                    t["photo_error " + p["error_kind"]] += 1
            for p in states.get("photos.orientation", {}).get("photos", []):
                t["rotated"] += bool(p.get("rotated_url"))
        # The stage's state (decoded with the node's types) rather than the offer's `videos`:
        # the same statuses, also to a gostctl built before Video had them.
        checked = {v["url"]: v.get("status", "VIDEO_STATUS_UNSPECIFIED")
                   for v in states.get("video.check", {}).get("videos", [])}
        for v in offer.get("videos", []):
            t["videos"] += 1
            t["video " + checked.get(v["url"], "VIDEO_STATUS_UNSPECIFIED")] += 1
    return t


def photos_done(t: dict) -> bool:
    return all(t[s] == t["photo_offers"] for s in PHOTO_STAGES)


def videos_done(t: dict) -> bool:
    return t["video VIDEO_STATUS_UNSPECIFIED"] == 0


def split_args(args: list[str]) -> tuple[list[str], list[str]]:
    i = args.index("--")
    return args[:i], args[i + 1:]


def progress(args: list[str]) -> int:
    """One line of words: `photos=done|N/M videos=done|N/M`."""
    gostctl, ids = split_args(args)
    t = tally(gostctl, ids)
    photos = "done" if photos_done(t) else "{}/{}".format(
        min(t[s] for s in PHOTO_STAGES), t["photo_offers"])
    videos = "done" if videos_done(t) else "{}/{}".format(
        t["videos"] - t["video VIDEO_STATUS_UNSPECIFIED"], t["videos"])
    print(f"photos={photos} videos={videos}")
    return 0


def summary(args: list[str]) -> int:
    price_log, rest = args[0], args[1:]
    gostctl, ids = split_args(rest)
    t = tally(gostctl, ids)
    n = t["photo_offers"]
    errors = ", ".join(f"{k.split(' ', 1)[1]} {v}" for k, v in sorted(t.items())
                       if k.startswith("photo_error "))
    print(f"  photos (photos.download, photos.ratio_color, photos.orientation): final on "
          f"{min(t[s] for s in PHOTO_STAGES)} of {n} offers with photos; "
          f"{t['photo PHOTO_STATUS_DONE']} photos done, {t['photo PHOTO_STATUS_ERROR']} errors"
          + (f" ({errors})" if errors else "") + f", {t['rotated']} turned upright (EXIF orientation)")
    print(f"  video.check: {t['videos']} videos: "
          f"{t['video VIDEO_STATUS_AVAILABLE']} available, "
          f"{t['video VIDEO_STATUS_UNAVAILABLE']} unavailable, "
          f"{t['video VIDEO_STATUS_UNKNOWN']} unknown, "
          f"{t['video VIDEO_STATUS_UNSPECIFIED']} not checked")
    if price_log == "-":
        return 0
    # The server logs each prediction: offer=ID ... price_minor=P currency=C confidence=X basis=B
    predicted = {}
    with open(price_log, encoding="utf-8") as f:
        for line in f:
            m = re.search(r"predicted offer=(\S+) .*price_minor=(\d+) currency=(\S+) "
                          r"confidence=(\S+) basis=(\S+)", line)
            if m:
                predicted[m.group(1)] = m.groups()[1:]
    for offer_id in ids:
        if offer_id not in predicted:
            continue
        offer, _ = inspect(gostctl, offer_id)
        price, currency, confidence, basis = predicted[offer_id]
        attrs = ",".join(f"{k}={v}" for k, v in sorted(offer.get("attributes", {}).items()))
        asked = int(offer.get("price", {}).get("amount_minor", 0)) / 100
        print(f"    {offer.get('category')}/{offer.get('address', {}).get('region')} {attrs}: "
              f"asks {asked:.2f}, predicted {int(price) / 100:.2f} {currency} "
              f"(confidence {confidence}, {basis})")
    return 0


def main() -> int:
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "media":
        return media(args[0])
    if cmd == "serve":
        return serve(args[0], args[1])
    if cmd == "offers":
        return offers(args[0], args[1])
    if cmd == "seed-model":
        return seed_model(args[0])
    if cmd == "progress":
        return progress(args)
    if cmd == "summary":
        return summary(args)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
