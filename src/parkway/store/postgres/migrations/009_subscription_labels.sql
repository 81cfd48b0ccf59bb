-- parkway schema, version 9: a subscription's usual label is not stored.

-- A subscription's label (what PublishResult's deliveries name) is NULL when it
-- is the one its kind, name and position make ("wait_for_event:<name>#<pos>"):
-- the store derives it on reading.
ALTER TABLE parkway.subscriptions ALTER COLUMN wait DROP NOT NULL;
