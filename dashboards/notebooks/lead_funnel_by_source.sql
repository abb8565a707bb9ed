-- Lead funnel by source
-- How far conversations from each source get: engaged, scored, qualified, contact given, handed off; over the sidebar's dates and channels ($from, $to, $tz, $channel).

-- %% [markdown] How to read this
-- Each row is a **lead source**; each column counts its conversations that reached that step:
--
-- * *engaged*: the end user wrote; *scored*: the conversation has a lead;
-- * *qualified*: the lead qualified;
-- * *contact captured* and *handed off* count qualified leads only (docs/warehouse.md, the funnel's steps).
--
-- The second cell reads the first one's result by its name, `funnel_steps_by_source`, so both always agree.

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
-- chart: bar x=source y=qualification_rate
SELECT source, qualified / started AS qualification_rate, started AS conversations
FROM funnel_steps_by_source
ORDER BY qualification_rate DESC;
