-- Which write made the row as it is: a UUID minted for every write claimd makes (the
-- group commit's inserts and updates set it), so that a write whose statement failed,
-- and which may have committed all the same, knows the row for its own and not for
-- another write that made the same state (docs/DESIGN.md §4.2.1). NULL for rows last
-- written before it existed.
ALTER TABLE receipts ADD COLUMN write_id BLOB CHECK (write_id IS NULL OR length(write_id) = 16);
