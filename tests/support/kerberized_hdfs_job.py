"""A Spark job of its own on a Kerberized HDFS (tests/integration/test_hdfs_kerberos.py).

``python -m tests.support.kerberized_hdfs_job CONFIG.json``. The process's environment is the job's: the
Kerberized HDFS's client configuration (``HADOOP_CONF_DIR``, which says ``kerberos``), the ticket cache a
``kinit`` filled (``KRB5CCNAME``; Hadoop's client in the JVM and hdfs-native in Python both read it), the realm's
``krb5.conf`` (``KRB5_CONFIG`` for the C library; the JVM's ``-Djava.security.krb5.conf`` is set here), and
tableswap's ``TABLESWAP_METASTORE_URI`` and ``TABLESWAP_JOURNAL_URL``.

It creates the database and the table at the config's ``hdfs://`` locations, swaps each batch in with
``swap_partitions`` and writes, after each, ``<dir>/result-N.json`` (the swap's result) and ``<dir>/read-N.json``
(what this job then reads: ``[dt, batch, rows]``), and ``<dir>/identity.json``: whom the JVM's Hadoop client
is (``UserGroupInformation``: user and authentication method).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(config_file: str) -> None:
    config = json.loads(Path(config_file).read_text())
    out = Path(config["dir"])
    from pyspark.sql import SparkSession

    from tableswap import swap_partitions

    spark = (SparkSession.builder.master("local[1]").appName("kerberized-hdfs-swap")
             .config("spark.hadoop.hive.metastore.uris", os.environ["TABLESWAP_METASTORE_URI"])
             .config("spark.driver.extraJavaOptions", f"-Djava.security.krb5.conf={os.environ['KRB5_CONFIG']}")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .config("spark.sql.warehouse.dir", str(out / "warehouse"))
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ugi = spark.sparkContext._jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser()
    (out / "identity.json").write_text(json.dumps({"user": ugi.getUserName(),
                                                   "method": ugi.getAuthenticationMethod().toString()}))
    db, table = config["db"], config["table"]
    spark.sql(f"CREATE DATABASE {db} LOCATION '{config['db_location']}'")
    spark.sql(f"CREATE TABLE {db}.{table} (id BIGINT, batch STRING, dt STRING) USING parquet "
              f"PARTITIONED BY (dt) LOCATION '{config['table_location']}'")
    for n, rows in enumerate(config["batches"], start=1):
        df = spark.createDataFrame([tuple(r) for r in rows], "id BIGINT, batch STRING, dt STRING")
        result = swap_partitions(df, f"{db}.{table}")
        (out / f"result-{n}.json").write_text(json.dumps(result.to_dict(), default=str))
        read = spark.sql(f"SELECT dt, batch, count(*) AS n FROM {db}.{table} GROUP BY dt, batch").collect()
        (out / f"read-{n}.json").write_text(json.dumps(sorted([r.dt, r.batch, r.n] for r in read)))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
