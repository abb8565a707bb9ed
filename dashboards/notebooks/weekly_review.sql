-- Weekly review
-- The week's KPIs against the week before, with 95 % intervals, then the top topics and the knowledge gaps; over the sidebar's dates and channels ($from, $to, $tz, $channel). A weekly [[reports]] report runs it over the previous ISO week.

-- %% [markdown] How to read this review
-- ## How to read this review
--
-- **Current** is the days from `from` to `to` (a scheduled weekly report: last
-- Monday to Sunday); **previous** is as many days just before. Each KPI is a
-- share of the conversations that started in those days, in the chosen time
-- zone and channels.
--
-- Every share comes with its **95 % interval**, computed here in SQL by the
-- same methods as the Compare page (`compare/_intervals.py`; docs/warehouse.md,
-- "Statistics of comparisons"):
--
-- - a share k of n: **Wilson's score interval** (exactly 0 at k = 0, 1 at k = n);
-- - the change, current minus previous: **Newcombe's hybrid score interval**
--   (method 10), built from the two sides' Wilson bounds.
--
-- A change is called **up** or **down** only when its interval leaves out 0;
-- otherwise it is **no clear change**. `small_sample` marks a KPI resting on
-- fewer than 30 conversations (or ratings) on a side: its interval is wide.

-- %% KPI counts
-- chart: none
WITH periods AS (
    SELECT 'current' AS period, 1 AS side, $from::DATE AS first_day, $to::DATE AS last_day
    UNION ALL
    SELECT 'previous', 2, $from::DATE - CAST($to::DATE - $from::DATE + 1 AS INTEGER), $from::DATE - 1
)
SELECT p.period, p.side, p.first_day, p.last_day,
       count(c.conversation_id) AS conversations,
       count(c.conversation_id) FILTER (WHERE c.status = 'resolved') AS resolved,
       count(c.conversation_id) FILTER (WHERE c.escalated) AS escalated,
       count(c.conversation_id) FILTER (WHERE c.contained) AS contained,
       count(c.conversation_id) FILTER (WHERE c.status = 'abandoned') AS abandoned,
       count(c.conversation_id) FILTER (WHERE c.qualified_at IS NOT NULL) AS leads_qualified,
       count(c.feedback_rating) AS rated,
       count(c.conversation_id) FILTER (WHERE c.positive_feedback) AS positive_feedback
FROM periods p
LEFT JOIN mart_conversations c
  ON timezone($tz, c.started_at)::DATE BETWEEN p.first_day AND p.last_day
 AND c.channel = ANY($channel)
GROUP BY ALL
ORDER BY p.side;

-- %% Rates
-- chart: none
WITH shares AS (
    SELECT period, side, 1 AS kpi_order, 'resolution rate' AS kpi, resolved AS k, conversations AS n FROM kpi_counts
    UNION ALL SELECT period, side, 2, 'escalation rate', escalated, conversations FROM kpi_counts
    UNION ALL SELECT period, side, 3, 'containment rate', contained, conversations FROM kpi_counts
    UNION ALL SELECT period, side, 4, 'abandonment rate', abandoned, conversations FROM kpi_counts
    UNION ALL SELECT period, side, 5, 'lead qualification rate', leads_qualified, conversations FROM kpi_counts
    UNION ALL SELECT period, side, 6, 'CSAT (positive of rated)', positive_feedback, rated FROM kpi_counts
), scored AS (
    SELECT *, 1.959963984540054 AS z, k::DOUBLE / nullif(n, 0) AS p FROM shares
), wilson AS (
    SELECT *, (p + z * z / (2 * n)) / (1 + z * z / n) AS centre,
           z / (1 + z * z / n) * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) AS half
    FROM scored
)
SELECT kpi_order, kpi, period, side, k, n, p AS rate,
       CASE WHEN n = 0 THEN NULL WHEN k = 0 THEN 0.0 ELSE greatest(0.0, centre - half) END AS low,
       CASE WHEN n = 0 THEN NULL WHEN k = n THEN 1.0 ELSE least(1.0, centre + half) END AS high
FROM wilson
ORDER BY kpi_order, side;

-- %% KPIs against the week before
-- chart: none
WITH paired AS (
    SELECT c.kpi_order, c.kpi, c.rate AS p1, c.low AS l1, c.high AS u1, c.n AS n1,
           p.rate AS p2, p.low AS l2, p.high AS u2, p.n AS n2
    FROM rates c JOIN rates p ON p.kpi_order = c.kpi_order AND c.side = 1 AND p.side = 2
), newcombe AS (
    SELECT *, p1 - p2 AS d,
           greatest(-1.0, p1 - p2 - sqrt(pow(p1 - l1, 2) + pow(u2 - p2, 2))) AS d_low,
           least(1.0, p1 - p2 + sqrt(pow(u1 - p1, 2) + pow(p2 - l2, 2))) AS d_high
    FROM paired
)
SELECT kpi,
       round(100 * p1, 1) AS current_pct, round(100 * l1, 1) AS current_low_pct,
       round(100 * u1, 1) AS current_high_pct, n1 AS current_n,
       round(100 * p2, 1) AS previous_pct, round(100 * l2, 1) AS previous_low_pct,
       round(100 * u2, 1) AS previous_high_pct, n2 AS previous_n,
       round(100 * d, 1) AS change_points, round(100 * d_low, 1) AS change_low_points,
       round(100 * d_high, 1) AS change_high_points,
       CASE WHEN n1 = 0 OR n2 = 0 THEN 'no data on a side'
            WHEN d_low > 0 THEN 'up' WHEN d_high < 0 THEN 'down'
            ELSE 'no clear change' END AS verdict,
       least(n1, n2) < 30 AS small_sample
FROM newcombe
ORDER BY kpi_order;

-- %% [markdown] Topics and knowledge gaps
-- ## Topics and knowledge gaps
--
-- **Top topics**: the ten topics with the most conversations in the current
-- days (merges applied: a merged topic counts under the one it joined), with
-- the previous days' count beside them. **Knowledge gaps**: the topics whose
-- assistant answers failed most (fallbacks and low-confidence answers, see
-- docs/warehouse.md, "Knowledge gaps"), ranked by impact: conversations with a
-- failing answer times their mean severity.

-- %% Top topics
-- chart: bar x=topic y=conversations
WITH chosen AS (
    SELECT c.workspace_id, c.topic, c.escalated,
           timezone($tz, c.started_at)::DATE >= $from::DATE AS current
    FROM mart_conversations c
    WHERE timezone($tz, c.started_at)::DATE
          BETWEEN $from::DATE - CAST($to::DATE - $from::DATE + 1 AS INTEGER) AND $to::DATE
      AND c.channel = ANY($channel)
)
SELECT coalesce(any_value(t.effective_label), '(no topic yet)') AS topic,
       count(*) FILTER (WHERE current) AS conversations,
       count(*) FILTER (WHERE NOT current) AS previous_conversations,
       round(100 * avg(escalated::INT) FILTER (WHERE current), 1) AS escalation_rate_pct
FROM chosen x
LEFT JOIN mart_topics t ON t.workspace_id = x.workspace_id AND t.topic = x.topic
GROUP BY x.workspace_id, coalesce(t.effective_topic_id::VARCHAR, x.topic)
HAVING count(*) FILTER (WHERE current) > 0
ORDER BY conversations DESC, topic
LIMIT 10;

-- %% Knowledge gaps
-- chart: bar x=topic y=impact
SELECT coalesce(any_value(t.effective_label), '(no topic yet)') AS topic,
       count(DISTINCT g.conversation_id) AS conversations,
       count(*) AS failing_answers,
       round(avg(g.severity), 2) AS mean_severity,
       round(count(DISTINCT g.conversation_id) * avg(g.severity), 1) AS impact,
       count(DISTINCT g.conversation_id) FILTER (WHERE g.escalated_after) AS escalated_after,
       count(*) FILTER (WHERE coalesce(trim(g.knowledge_source), '') = '') AS answers_without_source
FROM knowledge_gaps g
JOIN mart_conversations c USING (workspace_id, conversation_id)
LEFT JOIN mart_topics t ON t.workspace_id = g.workspace_id AND t.topic_id = g.topic_id
WHERE timezone($tz, g.answered_at)::DATE BETWEEN $from AND $to
  AND c.channel = ANY($channel)
GROUP BY g.workspace_id, coalesce(t.effective_topic_id, -1)
ORDER BY impact DESC, conversations DESC, topic
LIMIT 10;
