-- Whether any key was ever stored (revoked ones count): from then on every request needs one.
SELECT EXISTS (SELECT FROM api_keys) AS exist;
