"""The JVM parts tableswap fetches by Maven coordinates: the download cache (:mod:`.downloads`), Maven itself
(:mod:`.maven`) and the jars of the S3A connector, the Hive clients and the HDFS minicluster (:mod:`.jars`)."""
