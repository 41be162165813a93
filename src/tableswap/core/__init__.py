"""The pure core: partition names and locations, the swap plan, the commit checks, lineage, janitor
planning, names and the records the journal keeps. No I/O here: everything is a function of its input."""
