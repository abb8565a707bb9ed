-- Guardrail incidents per 1,000 responses by locale
-- Where the assistant's guardrails fire most, relative to how much it answers in each locale.

-- %% Incidents per 1,000 responses by locale
-- chart: bar
WITH responses AS (
    SELECT locale, sum(assistant_responses) AS responses
    FROM mart_conversations GROUP BY locale),
incidents AS (
    SELECT locale, count(*) AS incidents
    FROM mart_guardrail_incidents GROUP BY locale)
SELECT r.locale,
       round(1000.0 * coalesce(i.incidents, 0) / nullif(r.responses, 0), 2)
           AS incidents_per_1000_responses,
       coalesce(i.incidents, 0) AS incidents, r.responses
FROM responses r LEFT JOIN incidents i USING (locale)
ORDER BY incidents_per_1000_responses DESC NULLS LAST;

-- %% Incidents by locale and flag
SELECT locale, flag, count(*) AS incidents
FROM mart_guardrail_incidents
GROUP BY ALL
ORDER BY incidents DESC;
