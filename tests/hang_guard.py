"""The one wall-clock limit the tests use: a guard against a hung child or wait, never a speed
check. Every subprocess timeout, every wait for a line or a process, and every per-input guard
of the fuzz suites takes HANG_GUARD, so a slow or busy machine (two shared cores under a full
parallel suite) never fails a test; only something that never finishes does, and then later.

A wait that polls for a condition still fails when the condition never comes; it waits
HANG_GUARD for it. Tests assert what a run produced, never how long it took."""

HANG_GUARD = 3600   # seconds
