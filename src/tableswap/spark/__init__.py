"""Spark at the edge: staging a batch (``staging``) through the SparkSession API that classic and
Spark Connect sessions share (``api``). Only :mod:`tableswap.ops.write.swap` imports this package."""
