-- Whether the server loaded pg_stat_statements at its start (its views fail until it has).
SELECT 'pg_stat_statements' = ANY (string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ',')) AS loaded;
