-- A collection's financing rates by provider, tenor and rate type; fractions without trailing
-- zeros (0.085, not 0.085000).
SELECT provider, tenor_months, trim_scale(rate) AS rate, rate_type,
       trim_scale(min_down_payment) AS min_down_payment, created_at, updated_at
FROM financing_rates
WHERE collection_id = %(collection_id)s
ORDER BY provider, tenor_months, rate_type;
