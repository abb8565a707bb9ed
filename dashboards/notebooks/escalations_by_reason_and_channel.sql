-- Escalations by reason and channel
-- Which reasons hand conversations to a person, through which channel, and how that moves week by week; over the sidebar's dates and channels ($from, $to, $tz, $channel), narrowed to one reason if you like.
-- param: reason choice = (all)
-- values: SELECT '(all)' UNION ALL (SELECT DISTINCT reason_code FROM mart_escalations WHERE reason_code IS NOT NULL ORDER BY 1)

-- %% Escalations by reason
-- chart: bar
SELECT e.reason_code, count(*) AS escalations, count(DISTINCT e.conversation_id) AS conversations
FROM mart_escalations e
JOIN mart_conversations c USING (workspace_id, conversation_id)
WHERE timezone($tz, c.started_at)::DATE BETWEEN $from AND $to
  AND c.channel = ANY($channel)
  AND ($reason = '(all)' OR e.reason_code = $reason)
GROUP BY e.reason_code
ORDER BY escalations DESC;

-- %% Escalations by reason and channel
SELECT e.reason_code, c.channel, count(*) AS escalations
FROM mart_escalations e
JOIN mart_conversations c USING (workspace_id, conversation_id)
WHERE timezone($tz, c.started_at)::DATE BETWEEN $from AND $to
  AND c.channel = ANY($channel)
  AND ($reason = '(all)' OR e.reason_code = $reason)
GROUP BY ALL
ORDER BY escalations DESC;

-- %% Escalation rate per channel and week
SELECT date_trunc('week', timezone($tz, started_at))::DATE AS week, channel,
       avg(escalated::INT) AS escalation_rate
FROM mart_conversations
WHERE timezone($tz, started_at)::DATE BETWEEN $from AND $to
  AND channel = ANY($channel)
GROUP BY ALL
ORDER BY week, channel;
