"""Operations that write a batch: the swap (``swap_partitions`` / ``swap_table``), the backfill of many
units, and the state token of a read-modify-write job."""
