-- gost schema, version 5: a seller's offers in id order (OfferService.ListOffers pages).
CREATE INDEX offers_by_seller ON offers (seller_id, offer_id);
