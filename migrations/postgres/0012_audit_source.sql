-- Where each change came from ('console', 'api' or 'cli'; NULL for events recorded before
-- it was kept), and for the changes of one policy file's apply, the id they share.
ALTER TABLE audit_events ADD COLUMN source VARCHAR(16) NULL;
ALTER TABLE audit_events ADD COLUMN change_set VARCHAR(32) NULL;
