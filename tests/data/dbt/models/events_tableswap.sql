{{ config(incremental_strategy='tableswap', partition_by=['dt']) }}
{{ events_rows() }}
