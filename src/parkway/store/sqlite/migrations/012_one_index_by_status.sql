-- parkway schema, version 12: one index of runs by workflow and status.

-- runs_by_workflow (workflow, status) and runs_by_subject (workflow, domain,
-- subject, status) both held status, so each status change of a run (pending,
-- running, parked, ended) moved its entry in both: two index pages more in the
-- commit of every start, resume and end. One index with status second serves
-- both readers: the counts by workflow and status (its prefix) and a subject's
-- active run (active_run seeks each of the three live statuses).
DROP INDEX runs_by_workflow;
DROP INDEX runs_by_subject;
CREATE INDEX runs_by_workflow ON runs (workflow, status, domain, subject);
