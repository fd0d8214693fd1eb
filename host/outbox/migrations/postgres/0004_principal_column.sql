-- The principal travels as a column, not as a JSON header parsed again on every delivery.
-- (A constant default: no table rewrite.)
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS principal TEXT NOT NULL DEFAULT '';
-- Rows stored before this migration kept it in headers: move it for those still to deliver.
UPDATE outbox_messages SET principal = headers::jsonb ->> 'principal'
 WHERE NOT acked AND headers LIKE '%"principal"%'
   AND jsonb_typeof(headers::jsonb -> 'principal') = 'string';
