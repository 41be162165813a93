"""Tests against real servers (the Hive Metastore, Spark, the S3 and Glue emulators, PostgreSQL, MariaDB, a KDC,
Trino, HDFS, clusters) or processes of their own (writers killed at a step, the CLI, Maven)."""
