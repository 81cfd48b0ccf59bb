-- Commit marks: a sender's transaction sent with its COMMIT in one round trip
-- (a signal) writes a random mark here. If the connection dies before the
-- reply, a fresh connection inserts the same mark: a conflict means the
-- transaction committed (``result`` is what its statement found), an insert
-- that it did not and now never will (its own insert of the mark would fail).
-- Marks are only read within seconds of their commit; each ~1,000th marked
-- commit deletes those older than an hour.
CREATE TABLE parkway.commit_marks (
    mark   bigint PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    result text
);
