"""The HTTP API's route handlers, by area: runs, events and messages, people
(callbacks and human tasks), operations (workers, schedules, health, documents)."""
