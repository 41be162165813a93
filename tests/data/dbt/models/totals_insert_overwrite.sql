{{ config(incremental_strategy='insert_overwrite') }}
{{ totals_rows() }}
