"""The Glue table shape the Glue tests and the Glue benchmark create: a Hive-style parquet table as Athena, a Glue
crawler or Spark on EMR would create it (``id bigint, value string``; the partition keys are the caller's)."""

from __future__ import annotations

PARQUET_FORMAT = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                  "Parameters": {"serialization.format": "1"}},
}
#: A storage descriptor without its location: the format and the columns id and value.
PARQUET_SD = {"Columns": [{"Name": "id", "Type": "bigint"}, {"Name": "value", "Type": "string"}], **PARQUET_FORMAT}
