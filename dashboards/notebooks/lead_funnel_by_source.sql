-- Lead funnel by source
-- How far conversations from each source get: engaged, scored, qualified, contact given, handed off; over the sidebar's dates and channels ($from, $to, $tz, $channel).

-- %% Funnel steps by source
-- chart: none
SELECT source,
       count(*) AS started,
       count(engaged_at) AS engaged,
       count(scored_at) AS scored,
       count(qualified_at) AS qualified,
       count(*) FILTER (WHERE qualified_at IS NOT NULL AND contact_captured) AS contact_captured,
       count(*) FILTER (WHERE qualified_at IS NOT NULL AND handed_off_at IS NOT NULL) AS handed_off
FROM mart_conversations
WHERE timezone($tz, started_at)::DATE BETWEEN $from AND $to
  AND channel = ANY($channel)
GROUP BY source
ORDER BY started DESC;

-- %% Qualification rate by source
-- chart: bar
SELECT source, avg((qualified_at IS NOT NULL)::INT) AS qualification_rate, count(*) AS conversations
FROM mart_conversations
WHERE timezone($tz, started_at)::DATE BETWEEN $from AND $to
  AND channel = ANY($channel)
GROUP BY source
ORDER BY qualification_rate DESC;
