{#- Fails while Spark writes its rows (assert_true) when var('fail') is set: after its swap has begun. -#}
{{ config(incremental_strategy='tableswap', partition_by=['dt']) }}
select id, value, dt from ({{ events_rows() }}) as r
{% if var('fail', false) %} where assert_true(id < 0, 'the model failed') is null {% endif %}
