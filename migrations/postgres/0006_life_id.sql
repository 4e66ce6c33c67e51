-- Which life of (tenant, namespace, key) a row is: 16 random bytes chosen when the row is
-- inserted and never changed, bound into every value sealed in format 0x02 (src/seal.rs),
-- so a value from an earlier life of the same key (pruned, then claimed again) does not
-- open. NULL for rows inserted before lifetimes existed: they have the empty life.
ALTER TABLE receipts ADD COLUMN life_id bytea
    CHECK (life_id IS NULL OR octet_length(life_id) = 16);
