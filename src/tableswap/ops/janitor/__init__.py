"""The janitor: discover displaced and leftover locations (scan), read what every table references (refs),
delete under the re-check (execute), run it (run) and report on it (status)."""
