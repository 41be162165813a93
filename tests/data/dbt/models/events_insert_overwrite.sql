{{ config(incremental_strategy='insert_overwrite', partition_by=['dt']) }}
{{ events_rows() }}
