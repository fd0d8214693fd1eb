-- The principal travels as a column, not as a JSON header parsed again on every delivery.
ALTER TABLE outbox_messages ADD COLUMN principal TEXT NOT NULL DEFAULT '';
-- Rows stored before this migration kept it in headers: move it for those still to deliver.
UPDATE outbox_messages SET principal = json_extract(headers, '$.principal')
 WHERE acked = 0 AND headers LIKE '%"principal"%'
   AND json_type(headers, '$.principal') = 'text';
