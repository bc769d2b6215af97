-- A policy's mode: 'enforce' denies what the limit denies; 'shadow' decides and counts the
-- same way but grants every request (marked shadow_denied where it would have denied).
ALTER TABLE policies ADD COLUMN mode VARCHAR(8) NOT NULL DEFAULT 'enforce';
