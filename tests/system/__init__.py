"""System tests: processes, servers, browsers (the slow tier; `make test` runs it)."""
