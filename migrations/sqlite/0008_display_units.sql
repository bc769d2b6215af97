-- The units a policy's limits were entered in (rate: second, minute, hour or day;
-- window and lease lifetime: ms, second, minute, hour or day), so that the console shows
-- them back as entered. NULL: none chosen; the console then picks a readable one.
ALTER TABLE policies ADD COLUMN rate_unit VARCHAR(16) NULL;
ALTER TABLE policies ADD COLUMN window_unit VARCHAR(16) NULL;
ALTER TABLE policies ADD COLUMN lease_ttl_unit VARCHAR(16) NULL;
