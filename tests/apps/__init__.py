"""Apps that the system tests' worker and server subprocesses load by module name."""
