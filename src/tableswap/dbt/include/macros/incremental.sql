{#-
  The incremental materialization of the `tableswap` adapter type (docs/sql.md#dbt).

  incremental_strategy='tableswap': the model's rows are built as dbt-spark builds them (a temporary view),
  then one INSERT OVERWRITE of the table from that view runs through tableswap.sql (adapter.tableswap_sql):
  a swap that replaces exactly what Spark's own statement would.
    * an incremental run with partition_by: Spark's dynamic overwrite, as dbt-spark's insert_overwrite:
      the partitions the rows fall in;
    * an incremental run without partition_by: the whole table (swap_table);
    * --full-refresh of an existing table: Spark's static overwrite of the whole table, still one swap:
      every partition replaced, those without rows dropped; no drop, no re-create, no moment without the
      table. The columns stay the table's: a model whose columns differ is refused, nothing changed;
    * the first run (no table yet): dbt-spark's CREATE TABLE ... LOCATION ... AS SELECT (an EXTERNAL table,
      so location_root is required).
  Every other strategy is dbt-spark's own materialization, unchanged.
-#}

{% materialization incremental, adapter='tableswap', supported_languages=['sql', 'python'] -%}
  {%- if config.get('incremental_strategy') != 'tableswap' -%}
    {#- every other strategy: dbt-spark's own materialization, unchanged -#}
    {{ return(materialization_incremental_spark()) }}
  {%- endif -%}

  {%- set file_format = config.get('file_format', default='parquet') -%}
  {%- set partition_by = config.get('partition_by', none) -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set full_refresh = should_full_refresh() -%}
  {%- if model['language'] != 'sql' -%}
    {{ exceptions.raise_compiler_error("incremental_strategy 'tableswap' takes SQL models only; nothing was changed") }}
  {%- endif -%}
  {%- if file_format not in ['parquet', 'orc'] -%}
    {{ exceptions.raise_compiler_error("incremental_strategy 'tableswap' swaps parquet and orc tables, not file_format '" ~ file_format ~ "'; nothing was changed") }}
  {%- endif -%}

  {%- set target_relation = this -%}
  {%- set existing_relation = load_relation(this) -%}
  {%- set tmp_relation = this.incorporate(path={"identifier": this.identifier ~ '__dbt_tmp'}).include(database=false, schema=false) -%}

  {{ run_hooks(pre_hooks) }}

  {%- if existing_relation is none -%}
    {%- if config.get('location_root') is none -%}
      {{ exceptions.raise_compiler_error("incremental_strategy 'tableswap' needs location_root: tableswap swaps EXTERNAL tables, and dbt-spark creates " ~ target_relation ~ " EXTERNAL only with a location; nothing was changed") }}
    {%- endif -%}
    {%- call statement('main') -%}
      {{ create_table_as(False, target_relation, compiled_code) }}
    {%- endcall -%}
    {% do persist_constraints(target_relation, model) %}
  {%- elif existing_relation.is_view -%}
    {{ exceptions.raise_compiler_error(target_relation ~ " is a view: incremental_strategy 'tableswap' swaps a table's data; nothing was changed. Drop the view, and the next run creates the table") }}
  {%- else -%}
    {%- call statement('create_tmp_relation') -%}
      {{ create_table_as(True, tmp_relation, compiled_code) }}
    {%- endcall -%}
    {%- if full_refresh -%}
      {%- set changes = check_for_schema_changes(tmp_relation, existing_relation) -%}
      {%- if changes['schema_changed'] -%}
        {{ exceptions.raise_compiler_error("--full-refresh of " ~ target_relation ~ " through tableswap swaps its data, never its columns, and the model's columns differ from the table's (" ~ changes ~ "); nothing was changed. Alter the table's columns first, or drop it and run again to re-create it (readers see no table meanwhile)") }}
      {%- endif -%}
    {%- else -%}
      {%- do process_schema_changes(on_schema_change, tmp_relation, existing_relation) -%}
    {%- endif -%}
    {%- set response = adapter.tableswap_sql(tableswap_overwrite_sql(tmp_relation, target_relation, partition_by is not none and not full_refresh)) -%}
    {{ store_result('main', response=response) }}
  {%- endif -%}

  {% set should_revoke = should_revoke(existing_relation, full_refresh) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}


{#- The script adapter.tableswap_sql runs: the overwrite mode, then dbt-spark's insert_overwrite statement
    (its columns the table's, in the table's order), dynamic with the partition columns or static without. -#}
{% macro tableswap_overwrite_sql(source_relation, target_relation, dynamic) %}
  {%- set dest_cols_csv = adapter.get_columns_in_relation(target_relation) | map(attribute='quoted') | join(', ') -%}
  set spark.sql.sources.partitionOverwriteMode = {{ 'dynamic' if dynamic else 'static' }};
  insert overwrite table {{ target_relation }}
  {% if dynamic %}{{ partition_cols(label="partition") }}{% endif %}
  select {{ dest_cols_csv }} from {{ source_relation }}
{% endmacro %}
