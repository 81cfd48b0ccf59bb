-- The prune of old commit marks (see 003) by an index on their time, not a scan
-- of the table: a sender that commits 1,000 marked statements a second keeps
-- ~3.6 million marks (an hour's), and the scan took ~56 ms for a million of them
-- (~0.5 ms by the index), in the transaction of the commit that prunes.
CREATE INDEX commit_marks_by_at ON parkway.commit_marks (at);
