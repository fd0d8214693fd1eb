-- The claim's plan depends on fresh statistics for a table whose pending part turns over
-- completely in seconds: analyze after 1% of rows changed (default 10%).
ALTER TABLE outbox_messages SET (autovacuum_analyze_scale_factor = 0.01,
                                 autovacuum_analyze_threshold = 1000);
