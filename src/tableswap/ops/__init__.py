"""The operations: swap (the only Spark front end), the commit protocol they share, rollback, recover,
janitor, history and doctor. Each takes a :class:`~tableswap.runtime.Runtime` (or builds one)."""
