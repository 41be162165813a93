{{ config(incremental_strategy='tableswap') }}
{{ totals_rows() }}
