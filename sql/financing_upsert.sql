-- Insert or update a batch of financing rates by provider, tenor and rate type.
INSERT INTO financing_rates
    (collection_id, provider, tenor_months, rate, rate_type, min_down_payment)
SELECT %(collection_id)s, r.provider, r.tenor_months, r.rate, r.rate_type, r.min_down_payment
FROM unnest(%(providers)s::text[], %(tenors)s::integer[], %(rates)s::numeric[],
            %(rate_types)s::text[], %(min_down_payments)s::numeric[])
     AS r (provider, tenor_months, rate, rate_type, min_down_payment)
ON CONFLICT (collection_id, provider, tenor_months, rate_type) DO UPDATE
SET rate             = EXCLUDED.rate,
    min_down_payment = EXCLUDED.min_down_payment,
    updated_at       = now()
RETURNING provider, tenor_months, rate_type, (xmax = 0) AS created;
