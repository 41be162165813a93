"""The suite's support code: shared helpers, the launchers of the real servers the tests run against
(metastores, S3 and Glue emulators, KDC, Trino, HDFS, clusters), and the processes tests start and kill."""
