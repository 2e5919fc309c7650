#!/usr/bin/env python3
"""Writes a synthetic Avito Autoload feed (<Ads formatVersion="3" target="Avito.ru">) for the
feed benchmark (bench/feed.sh): N ads of about 1 KB each, deterministic for a seed.

    bench/feed_gen.py [--offers N] [--seed S] [--out PATH]   (default: 100000, 1, stdout)

The mix is what a large seller's file looks like, in categories and with values the shipped
catalog accepts (actors/feeds/data/*.tsv): cars without Title (composed from Make, Model and
Year), flats without Title (from Rooms, Square, Floor and Floors), clothes and shoes with
GoodsType/ApparelType, phones, laptops, furniture, fridges, bicycles and services; addresses in
cities of the gazetteer (weighted by population; some with Latitude/Longitude, some with
coordinates only), 3-8 photo URLs, Russian descriptions of a few hundred bytes (CDATA with
HTML for some), contacts and Avito's service fields (ignored by gost). Per-offer problems, as
real files have them: about 0.5% prices like "1 500 руб.", 0.2% unknown categories, 0.1%
repeated Ids. Prints the byte size and the problems planted to stderr. Python 3 stdlib only.
"""

import argparse
import os
import random
import sys
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
GAZETTEER = os.path.join(HERE, "..", "actors", "feeds", "data", "gazetteer.tsv")


def cities():
    """(name, lat, lon, population) of the gazetteer's cities with at least 100k people."""
    out = []
    with open(GAZETTEER, encoding="utf-8") as f:
        for line in f:
            cells = line.rstrip("\n").split("\t")
            if len(cells) < 8 or cells[0] != "city":
                continue
            pop = int(cells[7] or 0)
            if pop >= 100_000:
                out.append((cells[3], float(cells[5]), float(cells[6]), pop))
    if not out:
        sys.exit("feed_gen.py: no cities in " + GAZETTEER)
    return out


STREETS = ["ул. Ленина", "ул. Советская", "ул. Мира", "пр-т Победы", "ул. Гагарина",
           "ул. Садовая", "ул. Пушкина", "ул. Московская", "ул. Центральная", "ул. Молодёжная",
           "ул. Школьная", "ул. Лесная", "наб. Реки", "ул. Кирова", "ул. Октябрьская",
           "пер. Почтовый", "ш. Энтузиастов", "ул. Строителей", "б-р Космонавтов", "ул. Заводская"]

CARS = {  # make -> models
    "Lada": ["Granta", "Vesta", "Largus", "Niva Travel", "XRAY", "Priora", "Kalina"],
    "Toyota": ["Camry", "Corolla", "RAV4", "Land Cruiser Prado", "Highlander"],
    "Kia": ["Rio", "Ceed", "Sportage", "Optima", "Sorento", "K5"],
    "Hyundai": ["Solaris", "Creta", "Tucson", "Elantra", "Santa Fe"],
    "Volkswagen": ["Polo", "Tiguan", "Passat", "Jetta", "Touareg"],
    "Skoda": ["Octavia", "Rapid", "Kodiaq", "Superb"],
    "Renault": ["Logan", "Duster", "Sandero", "Kaptur", "Arkana"],
    "BMW": ["3 серии", "5 серии", "X5", "X3", "X1"],
    "Mercedes-Benz": ["E-класс", "C-класс", "GLE", "S-класс"],
    "Nissan": ["Qashqai", "X-Trail", "Almera", "Terrano"],
    "Haval": ["Jolion", "F7", "H6", "Dargo"],
    "Chery": ["Tiggo 4", "Tiggo 7 Pro", "Tiggo 8"],
    "Geely": ["Coolray", "Monjaro", "Atlas"],
    "Mazda": ["6", "CX-5", "3"],
    "Ford": ["Focus", "Mondeo", "Kuga"],
    "Mitsubishi": ["Outlander", "Lancer", "Pajero Sport", "ASX"],
}
TRANSMISSIONS = ["Механика", "Автомат", "Робот", "Вариатор"]
BODIES = ["Седан", "Хетчбэк", "Универсал", "Внедорожник", "Лифтбек", "Минивэн"]
FUELS = ["Бензин", "Бензин", "Бензин", "Дизель", "Гибрид", "Газ"]
DRIVES = ["Передний", "Передний", "Полный", "Задний"]
COLORS = ["Белый", "Чёрный", "Серый", "Серебристый", "Синий", "Красный", "Коричневый",
          "Бежевый", "Зелёный"]
HOUSES = ["Панельный", "Кирпичный", "Монолитный", "Блочный", "Монолитно-кирпичный"]

CLOTHES = [  # GoodsType, ApparelType, titles, sizes (enum, or numeric shoes)
    ("Женская одежда", "Платья", ["Платье летнее", "Платье вечернее", "Платье миди",
                                  "Сарафан льняной"], ["42", "44", "46", "48", "S", "M"]),
    ("Женская одежда", "Верхняя одежда", ["Пуховик женский", "Пальто демисезонное",
                                          "Куртка кожаная"], ["44", "46", "48", "M", "L"]),
    ("Женская одежда", "Джинсы", ["Джинсы прямые", "Джинсы скинни"], ["40", "42", "44", "S"]),
    ("Мужская одежда", "Верхняя одежда", ["Куртка зимняя мужская", "Парка", "Пуховик"],
     ["48", "50", "52", "54", "L", "XL"]),
    ("Мужская одежда", "Рубашки", ["Рубашка классическая", "Рубашка льняная"],
     ["48", "50", "52", "M", "L"]),
    ("Мужская одежда", "Трикотаж", ["Свитер шерстяной", "Худи оверсайз"], ["M", "L", "XL", "XXL"]),
    ("Женская одежда", "Женская обувь", ["Ботинки женские", "Туфли кожаные", "Кроссовки"],
     ["36", "37", "38", "39", "40"]),
]
CLOTHES_BRANDS = ["Zara", "Mango", "H&M", "Uniqlo", "Gloria Jeans", "Love Republic", "Befree",
                  "Lime", "12 Storeez", "Levi's", "Adidas", "Nike", "The North Face"]
MATERIALS = ["хлопок", "шерсть", "лён", "полиэстер", "вискоза", "кожа", "экокожа", "дерево",
             "ЛДСП", "МДФ", "металл"]

PHONES = {
    "Apple": ["iPhone 11", "iPhone 12", "iPhone 13", "iPhone 14 Pro", "iPhone 15"],
    "Samsung": ["Galaxy S21", "Galaxy S23", "Galaxy A54", "Galaxy A34"],
    "Xiaomi": ["Redmi Note 12", "Redmi Note 13 Pro", "13T", "Poco X5"],
    "Honor": ["X8a", "90", "Magic5 Lite"],
    "Realme": ["C55", "11 Pro"],
}
MEMORY = ["64 ГБ", "128 ГБ", "128 ГБ", "256 ГБ", "512 ГБ"]

LAPTOPS = [("Apple", "MacBook Air M1"), ("Apple", "MacBook Pro 14"), ("Lenovo", "IdeaPad 5"),
           ("ASUS", "VivoBook 15"), ("HP", "Pavilion 15"), ("Acer", "Aspire 5"),
           ("Huawei", "MateBook D15"), ("MSI", "Modern 14")]
CPUS = ["Intel Core i5-1135G7", "Intel Core i7-1255U", "AMD Ryzen 5 5500U", "Apple M1",
        "AMD Ryzen 7 5700U"]

FURNITURE = [
    ("Кровати, диваны и кресла", ["Диван угловой", "Кровать двуспальная 160х200",
                                  "Кресло-качалка", "Диван-книжка"]),
    ("Шкафы, комоды и стеллажи", ["Шкаф-купе", "Комод на 4 ящика", "Стеллаж для книг"]),
    ("Столы и стулья", ["Стол обеденный раздвижной", "Стулья, 4 шт.", "Письменный стол"]),
]

SERVICES = [("Ремонт и отделка", ["Ремонт квартир под ключ", "Укладка плитки",
                                  "Электрик, все виды работ"]),
            ("Перевозки и аренда транспорта", ["Грузоперевозки, переезды", "Газель с грузчиками"]),
            ("Красота", ["Маникюр и педикюр на дому", "Стрижки и окрашивание"]),
            ("Обучение, курсы", ["Репетитор по математике", "Английский язык онлайн"])]

UNKNOWN_CATEGORIES = ["Космическая техника", "Телепорты и порталы", "Машины времени"]

OPENERS = ["Продаю в связи с переездом.", "Срочная продажа, торг уместен.",
           "Вещь в отличном состоянии, использовалась аккуратно.",
           "Один владелец, все документы на руках.", "Продаю, так как купили новое.",
           "Полностью исправно, никаких вложений не требуется."]
MIDDLES = ["Возможен осмотр в удобное для вас время, звоните или пишите в сообщения.",
           "Отвечу на все вопросы, дополнительные фотографии вышлю по запросу.",
           "Доставка по городу возможна за отдельную плату, самовывоз от метро.",
           "Подробности по телефону, на звонки отвечаю с 9 до 21 часа.",
           "Никаких скрытых дефектов, всё как на фотографиях.",
           "Есть чек и гарантийный талон, коробка и документы сохранены.",
           "Обмен не предлагать, перекупщикам просьба не беспокоить.",
           "Цена окончательная, торг только у реального покупателя при осмотре."]
CLOSERS = ["Звоните!", "Пишите в сообщения, отвечу быстро.", "Самовывоз.",
           "Покажу в любой день.", "Спасибо за внимание к объявлению."]


class Gen:
    def __init__(self, rnd, city_list):
        self.r = rnd
        self.cities = city_list
        self.weights = [c[3] for c in city_list]

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def description(self, subject, html):
        r = self.r
        parts = [subject + ".", self.pick(OPENERS)]
        parts += r.sample(MIDDLES, 1 if r.random() < 0.7 else 2)
        parts.append(self.pick(CLOSERS))
        if html:
            return "<p>" + "</p><p>".join(parts) + "</p>"
        return " ".join(parts)

    def location(self):
        """(address or None, lat, lon or None)."""
        r = self.r
        name, lat, lon, _ = r.choices(self.cities, weights=self.weights)[0]
        address = "%s, %s, д. %d" % (name, self.pick(STREETS), r.randint(1, 150))
        kind = r.random()
        if kind < 0.7:
            return address, None, None
        plat = "%.6f" % (lat + r.uniform(-0.05, 0.05))
        plon = "%.6f" % (lon + r.uniform(-0.08, 0.08))
        if kind < 0.9:
            return address, plat, plon
        return None, plat, plon

    def photos(self):
        n = self.r.randint(3, 8)
        host = self.pick(["img.seller.ru", "cdn.autoshop.ru", "photo.market.ru"])
        return ["https://%s/%012x.jpg" % (host, self.r.getrandbits(48)) for _ in range(n)]

    # Each returns (category fields, title or None, attributes, price, subject of the text).
    def car(self):
        r = self.r
        make = self.pick(list(CARS))
        model = self.pick(CARS[make])
        year = r.randint(2005, 2024)
        attrs = [("Make", make), ("Model", model), ("Year", str(year)),
                 ("Kilometrage", str(r.randint(0, 300) * 1000 if year < 2024 else 0)),
                 ("Transmission", self.pick(TRANSMISSIONS)), ("BodyType", self.pick(BODIES)),
                 ("FuelType", self.pick(FUELS)), ("DriveType", self.pick(DRIVES)),
                 ("EngineSize", "%.1f" % r.choice([1.4, 1.6, 1.8, 2.0, 2.5, 3.0])),
                 ("Power", str(r.randint(90, 250))), ("WheelType", "Левый"),
                 ("Owners", str(r.randint(1, 4))), ("Color", self.pick(COLORS))]
        # Make, Model, Year and Kilometrage always; each of the others in most ads.
        attrs = attrs[:4] + [a for a in attrs[4:] if r.random() < 0.6]
        price = r.randint(30, 600) * 10000
        return [("Category", "Автомобили")], None, attrs, price, "%s %s %d года" % (make, model, year)

    def flat(self):
        r = self.r
        rooms = self.pick(["Студия", "1", "1", "2", "2", "3", "4"])
        n = 1 if rooms == "Студия" else int(rooms)
        square = round(r.uniform(18, 30) + n * r.uniform(14, 22), 1)
        floors = r.choice([5, 9, 10, 12, 16, 17, 25])
        attrs = [("OperationType", "Продам"), ("Rooms", rooms), ("Square", str(square)),
                 ("Floor", str(r.randint(1, floors))), ("Floors", str(floors)),
                 ("HouseType", self.pick(HOUSES)),
                 ("KitchenSpace", str(round(r.uniform(5, 15), 1))),
                 ("LivingSpace", str(round(square * 0.6, 1)))]
        price = int(square * r.randint(90, 350)) * 1000
        subject = "Квартира %s м², %s" % (square, "студия" if n == 1 and rooms == "Студия"
                                          else "%d комн." % n)
        return [("Category", "Квартиры")], None, attrs, price, subject

    def clothes(self):
        r = self.r
        goods, apparel, titles, sizes = self.pick(CLOTHES)
        title = "%s %s" % (self.pick(titles), self.pick(CLOTHES_BRANDS))
        attrs = [("Condition", self.pick(["Новое с биркой", "Б/у", "Новое"])),
                 ("Size", self.pick(sizes)), ("Color", self.pick(COLORS)),
                 ("Brand", self.pick(CLOTHES_BRANDS)), ("Material", self.pick(MATERIALS[:7]))]
        cats = [("Category", "Одежда, обувь, аксессуары"), ("GoodsType", goods),
                ("ApparelType", apparel)]
        return cats, title, attrs, r.randint(5, 300) * 100, title

    def phone(self):
        r = self.r
        brand = self.pick(list(PHONES))
        model = self.pick(PHONES[brand])
        memory = self.pick(MEMORY)
        title = "%s %s %s" % ("" if brand == "Apple" else brand, model, memory)
        title = title.strip()
        attrs = [("Brand", brand), ("Model", model), ("Memory", memory),
                 ("Color", self.pick(COLORS[:5])), ("Condition", self.pick(["Б/у", "Новое"]))]
        cats = [("Category", "Телефоны"), ("GoodsType", "Мобильные телефоны")]
        return cats, title, attrs, r.randint(30, 1500) * 100, title

    def laptop(self):
        r = self.r
        brand, model = self.pick(LAPTOPS)
        ram = self.pick(["8", "16", "16", "32"])
        title = "Ноутбук %s %s, %s ГБ" % (brand, model, ram)
        attrs = [("Brand", brand), ("Model", model), ("RAM", ram + " ГБ"),
                 ("Storage", self.pick(["256", "512", "1024"]) + " ГБ"), ("CPU", self.pick(CPUS)),
                 ("ScreenSize", self.pick(["13.3", "14", "15.6"])),
                 ("Condition", self.pick(["Б/у", "Новое"]))]
        return [("Category", "Ноутбуки")], title, attrs, r.randint(150, 2000) * 100, title

    def furniture(self):
        r = self.r
        goods, titles = self.pick(FURNITURE)
        title = self.pick(titles)
        attrs = [("Condition", self.pick(["Б/у", "Новое"])), ("Color", self.pick(COLORS)),
                 ("Material", self.pick(MATERIALS[7:]))]
        cats = [("Category", "Мебель и интерьер"), ("GoodsType", goods)]
        return cats, title, attrs, r.randint(10, 800) * 100, title

    def fridge(self):
        r = self.r
        brand = self.pick(["Atlant", "Bosch", "LG", "Samsung", "Indesit", "Haier", "Beko"])
        title = "Холодильник %s" % brand
        attrs = [("Brand", brand), ("Condition", self.pick(["Б/у", "Новое"])),
                 ("Color", self.pick(["Белый", "Серебристый", "Чёрный"]))]
        cats = [("Category", "Бытовая техника"), ("GoodsType", "Холодильники и морозильные камеры")]
        return cats, title, attrs, r.randint(50, 900) * 100, title

    def bike(self):
        r = self.r
        brand = self.pick(["Stels", "Forward", "Merida", "Trek", "Author", "Giant"])
        title = "Велосипед %s" % brand
        attrs = [("Brand", brand), ("WheelSize", self.pick(["20", "24", "26", "27.5", "29"])),
                 ("FrameSize", self.pick(["S", "M", "L", "17\"", "19\""])),
                 ("Condition", self.pick(["Б/у", "Новое"]))]
        return [("Category", "Велосипеды")], title, attrs, r.randint(30, 1200) * 100, title

    def service(self):
        r = self.r
        kind, titles = self.pick(SERVICES)
        title = self.pick(titles)
        cats = [("Category", "Предложение услуг")]
        return cats, title, [("ServiceType", kind)], r.randint(5, 100) * 100, title

    KINDS = [("car", 24), ("flat", 18), ("clothes", 16), ("phone", 11), ("furniture", 9),
             ("service", 8), ("laptop", 5), ("fridge", 5), ("bike", 4)]


def write_ad(out, g, ad_id, problems):
    r = g.r
    kind = r.choices([k for k, _ in Gen.KINDS], weights=[w for _, w in Gen.KINDS])[0]
    cats, title, attrs, price, subject = getattr(g, kind)()
    if r.random() < 0.002:
        cats = [("Category", g.pick(UNKNOWN_CATEGORIES))]
        title = title or subject
        problems["unknown_category"] += 1
    price_text = str(price)
    if r.random() < 0.005:
        price_text = "{:,}".format(price).replace(",", " ") + " руб."
        problems["bad_price"] += 1
    address, lat, lon = g.location()
    html = r.random() < 0.3
    text = g.description(subject, html)
    lines = ["<Ad>", "<Id>%s</Id>" % ad_id]
    if r.random() < 0.2:
        lines.append("<DateBegin>2026-%02d-%02d</DateBegin>" % (r.randint(1, 12), r.randint(1, 28)))
    if r.random() < 0.3:
        lines.append("<AdType>%s</AdType>" % g.pick(["Товар приобретен на продажу",
                                                    "Продаю своё", "Товар от производителя"]))
    for name, value in cats:
        lines.append("<%s>%s</%s>" % (name, escape(value), name))
    if title:
        lines.append("<Title>%s</Title>" % escape(title))
    for name, value in attrs:
        lines.append("<%s>%s</%s>" % (name, escape(value), name))
    lines.append("<Price>%s</Price>" % price_text)
    if address:
        lines.append("<Address>%s</Address>" % escape(address))
    if lat:
        lines.append("<Latitude>%s</Latitude>\n<Longitude>%s</Longitude>" % (lat, lon))
    if html:
        lines.append("<Description><![CDATA[%s]]></Description>" % text)
    else:
        lines.append("<Description>%s</Description>" % escape(text))
    lines.append("<Images>")
    for url in g.photos():
        lines.append('<Image url="%s"/>' % url)
    lines.append("</Images>")
    lines.append("<ContactPhone>+7 9%02d %03d-%02d-%02d</ContactPhone>"
                 % (r.randint(0, 99), r.randint(0, 999), r.randint(0, 99), r.randint(0, 99)))
    if r.random() < 0.3:
        lines.append("<ManagerName>%s</ManagerName>"
                     % g.pick(["Анна", "Сергей", "Ольга", "Дмитрий", "Елена", "Алексей"]))
    lines.append("</Ad>\n")
    out.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--offers", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    g = Gen(random.Random(a.seed), cities())
    problems = {"bad_price": 0, "unknown_category": 0, "duplicate_id": 0}
    tmp = None if a.out == "-" else a.out + ".tmp"
    out = sys.stdout if tmp is None else open(tmp, "w", encoding="utf-8", buffering=1 << 20)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n<Ads formatVersion="3" target="Avito.ru">\n')
    issued = []
    for n in range(1, a.offers + 1):
        ad_id = "ad-%07d" % n
        if issued and g.r.random() < 0.001:  # the same Id again: a seller's copy-paste
            ad_id = g.pick(issued[-5000:])
            problems["duplicate_id"] += 1
        else:
            issued.append(ad_id)
        write_ad(out, g, ad_id, problems)
    out.write("</Ads>\n")
    if tmp is not None:
        out.close()
        os.replace(tmp, a.out)
        size = os.path.getsize(a.out)
    else:
        out.flush()
        size = None
    print("feed_gen.py: %d ads, %s bytes, seed %d; planted: %d bad prices, %d unknown "
          "categories, %d repeated Ids" % (a.offers, size if size is not None else "?", a.seed,
                                           problems["bad_price"], problems["unknown_category"],
                                           problems["duplicate_id"]), file=sys.stderr)


if __name__ == "__main__":
    main()
