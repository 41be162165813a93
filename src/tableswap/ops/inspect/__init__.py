"""Reading, never changing: history and show, a table as of a past swap, ``doctor``."""
