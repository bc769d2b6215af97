-- The first characters of an API key ("rk_key_3fa9"), shown so that keys with the same
-- label can be told apart (NULL for keys made before it was kept); and, for a key rotated
-- away, the id of the key that replaced it.
ALTER TABLE api_keys ADD COLUMN key_prefix VARCHAR(16) NULL;
ALTER TABLE api_keys ADD COLUMN replaced_by VARCHAR(32) NULL;
