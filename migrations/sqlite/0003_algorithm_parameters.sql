-- The parameters of the algorithms beyond the token bucket. NULL where the policy's
-- algorithm does not use them; `rate` is 0 for the algorithms that take no rate.
ALTER TABLE policies ADD COLUMN window_ms BIGINT NULL;
ALTER TABLE policies ADD COLUMN lease_ttl_ms BIGINT NULL;
