"""Long-running guarantee campaigns (pytest marker ``campaign``)."""


def child_spark(uri: str, warehouse: str, app: str):
    """A one-core SparkSession for a campaign's separate reader or writer process."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName(app)
             .config("spark.hadoop.hive.metastore.uris", uri)
             .config("spark.sql.warehouse.dir", warehouse)
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    return spark
