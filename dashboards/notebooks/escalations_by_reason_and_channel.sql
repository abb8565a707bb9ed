-- Escalations by reason and channel
-- Which reasons hand conversations to a person, through which channel, and how that moves week by week.

-- %% Escalations by reason
-- chart: bar
SELECT reason_code, count(*) AS escalations, count(DISTINCT conversation_id) AS conversations
FROM mart_escalations
GROUP BY reason_code
ORDER BY escalations DESC;

-- %% Escalations by reason and channel
SELECT e.reason_code, c.channel, count(*) AS escalations
FROM mart_escalations e
JOIN mart_conversations c USING (conversation_id)
GROUP BY ALL
ORDER BY escalations DESC;

-- %% Escalation rate per channel and week
SELECT date_trunc('week', started_at)::DATE AS week, channel,
       avg(escalated::INT) AS escalation_rate
FROM mart_conversations
GROUP BY ALL
ORDER BY week, channel;
