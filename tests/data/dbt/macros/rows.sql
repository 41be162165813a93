{#- The rows every model selects: var('source') (a table the test writes), and on an incremental run only
    the days from var('since') on. -#}
{% macro events_rows() %}
  select id, value, dt from {{ var('source') }}
  {% if is_incremental() %} where dt >= '{{ var("since") }}' {% endif %}
{% endmacro %}

{% macro totals_rows() %}
  select dt, count(*) as n, sum(value) as total from {{ var('source') }} group by dt
{% endmacro %}
