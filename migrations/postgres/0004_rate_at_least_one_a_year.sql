-- Rates below one permit a year (accepted before, now refused) are raised to it: every time
-- derived from such a rate overflowed what a reply can carry. A changed policy, a new version.
UPDATE policies SET rate = 0.000000032, version = version + 1 WHERE rate > 0 AND rate < 0.000000032;
