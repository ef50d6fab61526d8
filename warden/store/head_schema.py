"""The SQLite schema warden's migrations make, at their head, as SQLite's own statements.

A new SQLite database is made from these in one transaction (~5 ms) rather than by Alembic, whose
import and run of every migration takes ~0.15 s that a first command waits for (a first collect's
writer, before it can store anything). The test suite holds them to what the migrations make; after
adding a migration, replace them with what ``python -m warden.store.head_schema`` prints.
"""

from __future__ import annotations

REVISION = "0005"
STATEMENTS: tuple[str, ...] = (
    ('CREATE TABLE alembic_version (\n'
     '\tversion_num VARCHAR(32) NOT NULL, \n'
     '\tCONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)\n'
     ')'),
    ('CREATE TABLE bench_passes (\n'
     '\tid INTEGER NOT NULL, \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\tpurpose VARCHAR(20) NOT NULL, \n'
     '\tbackend VARCHAR(40) NOT NULL, \n'
     '\tmodel VARCHAR(120) NOT NULL, \n'
     '\tsuite_hash VARCHAR(64) NOT NULL, \n'
     '\tfixture_hash VARCHAR(64) NOT NULL, \n'
     '\tplan_key VARCHAR(200) NOT NULL, \n'
     '\tstatus VARCHAR(20) NOT NULL, \n'
     '\tbudget_tokens BIGINT, \n'
     '\tnote TEXT NOT NULL, \n'
     '\tcreated_at DATETIME NOT NULL, \n'
     '\tfinished_at DATETIME, \n'
     '\tCONSTRAINT pk_bench_passes PRIMARY KEY (id)\n'
     ')'),
    'CREATE INDEX ix_bench_passes_agent ON bench_passes (agent)',
    'CREATE INDEX ix_bench_passes_plan_key ON bench_passes (plan_key)',
    ('CREATE TABLE bench_runs (\n'
     '\tid INTEGER NOT NULL, \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\ttask_id VARCHAR(200) NOT NULL, \n'
     '\tconfig_key VARCHAR(400) NOT NULL, \n'
     '\trule_ids JSON NOT NULL, \n'
     '\truleset_version INTEGER, \n'
     '\tmemory_sha256 VARCHAR(64) NOT NULL, \n'
     '\tbackend VARCHAR(40) NOT NULL, \n'
     '\tmodel VARCHAR(120) NOT NULL, \n'
     '\tseed BIGINT NOT NULL, \n'
     '\tsuite_hash VARCHAR(64) NOT NULL, \n'
     '\tfixture_hash VARCHAR(64) NOT NULL, \n'
     '\toutcome VARCHAR(20) NOT NULL, \n'
     '\tcompleted BOOLEAN NOT NULL, \n'
     '\tturns INTEGER NOT NULL, \n'
     '\tduration_s FLOAT NOT NULL, \n'
     '\tcost_usd FLOAT NOT NULL, \n'
     '\tweighted_tokens FLOAT NOT NULL, \n'
     '\tcalls JSON NOT NULL, \n'
     '\terror TEXT NOT NULL, \n'
     '\tcreated_at DATETIME NOT NULL, \n'
     '\tinput_tokens BIGINT NOT NULL, \n'
     '\toutput_tokens BIGINT NOT NULL, \n'
     '\tcache_write_5m_tokens BIGINT NOT NULL, \n'
     '\tcache_write_1h_tokens BIGINT NOT NULL, \n'
     '\tcache_read_tokens BIGINT NOT NULL, \n'
     '\tCONSTRAINT pk_bench_runs PRIMARY KEY (id)\n'
     ')'),
    'CREATE INDEX ix_bench_runs_lookup ON bench_runs (agent, task_id, config_key, backend, model)',
    ('CREATE TABLE capture_states (\n'
     '\trun_key VARCHAR(300) NOT NULL, \n'
     '\tstate JSON NOT NULL, \n'
     '\tupdated_at DATETIME NOT NULL, \n'
     '\tCONSTRAINT pk_capture_states PRIMARY KEY (run_key)\n'
     ')'),
    ('CREATE TABLE ingest_offsets (\n'
     '\tpath VARCHAR(1000) NOT NULL, \n'
     '\trun_key VARCHAR(300), \n'
     '\t"offset" BIGINT NOT NULL, \n'
     '\tsize BIGINT NOT NULL, \n'
     '\tmtime_ns BIGINT NOT NULL, \n'
     '\thead_sha256 VARCHAR(64) NOT NULL, \n'
     '\tparser_state JSON NOT NULL, \n'
     '\tparser_version VARCHAR(40) NOT NULL, \n'
     '\tupdated_at DATETIME NOT NULL, \n'
     '\tCONSTRAINT pk_ingest_offsets PRIMARY KEY (path)\n'
     ')'),
    ('CREATE TABLE nightly_runs (\n'
     '\tid INTEGER NOT NULL, \n'
     '\tstatus VARCHAR(20) NOT NULL, \n'
     '\tstage VARCHAR(20) NOT NULL, \n'
     '\tagents JSON NOT NULL, \n'
     '\tbudget_tokens BIGINT, \n'
     '\tsummary JSON NOT NULL, \n'
     '\tstarted_at DATETIME NOT NULL, \n'
     '\tfinished_at DATETIME, \n'
     '\tCONSTRAINT pk_nightly_runs PRIMARY KEY (id)\n'
     ')'),
    ('CREATE TABLE ruleset_versions (\n'
     '\tid INTEGER NOT NULL, \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\tversion INTEGER NOT NULL, \n'
     '\trule_ids JSON NOT NULL, \n'
     '\trules_sha256 VARCHAR(64) NOT NULL, \n'
     '\tmemory_sha256 VARCHAR(64) NOT NULL, \n'
     '\tmemory_path TEXT NOT NULL, \n'
     '\tcreated_at DATETIME NOT NULL, \n'
     '\tCONSTRAINT pk_ruleset_versions PRIMARY KEY (id), \n'
     '\tCONSTRAINT uq_ruleset_versions_agent UNIQUE (agent, version)\n'
     ')'),
    ('CREATE TABLE session_runs (\n'
     '\tid INTEGER NOT NULL, \n'
     '\trun_key VARCHAR(300) NOT NULL, \n'
     '\tsession_id VARCHAR(200) NOT NULL, \n'
     '\tagent_id VARCHAR(200), \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\tproject TEXT, \n'
     '\tmodels JSON NOT NULL, \n'
     '\tstarted_at DATETIME, \n'
     '\tended_at DATETIME, \n'
     '\tcost_usd FLOAT NOT NULL, \n'
     '\tweighted_tokens FLOAT NOT NULL, \n'
     '\ttool_calls INTEGER NOT NULL, \n'
     '\tfile_reads INTEGER NOT NULL, \n'
     '\trereads INTEGER NOT NULL, \n'
     '\tgreps INTEGER NOT NULL, \n'
     '\tedits INTEGER NOT NULL, \n'
     '\tfailed_tool_results INTEGER NOT NULL, \n'
     '\tcompleted BOOLEAN NOT NULL, \n'
     '\tplaceholder_output BOOLEAN NOT NULL, \n'
     '\tunknown_model BOOLEAN NOT NULL, \n'
     '\ttrace_digest JSON NOT NULL, \n'
     '\tline_stats JSON NOT NULL, \n'
     '\tsource_path TEXT NOT NULL, \n'
     '\tsource_offset BIGINT NOT NULL, \n'
     '\tparser_version VARCHAR(40) NOT NULL, \n'
     '\torigin VARCHAR(20) NOT NULL, \n'
     '\tdistill_state VARCHAR(20), \n'
     '\tdistilled_at DATETIME, \n'
     '\tcreated_at DATETIME NOT NULL, \n'
     '\tupdated_at DATETIME NOT NULL, \n'
     '\tinput_tokens BIGINT NOT NULL, \n'
     '\toutput_tokens BIGINT NOT NULL, \n'
     '\tcache_write_5m_tokens BIGINT NOT NULL, \n'
     '\tcache_write_1h_tokens BIGINT NOT NULL, \n'
     '\tcache_read_tokens BIGINT NOT NULL, \n'
     '\tCONSTRAINT pk_session_runs PRIMARY KEY (id), \n'
     '\tCONSTRAINT uq_session_runs_run_key UNIQUE (run_key)\n'
     ')'),
    'CREATE INDEX ix_session_runs_distill_state ON session_runs (distill_state)',
    'CREATE INDEX ix_session_runs_session_id ON session_runs (session_id)',
    ('CREATE TABLE usage_messages (\n'
     '\tmessage_key VARCHAR(400) NOT NULL, \n'
     '\trun_key VARCHAR(300) NOT NULL, \n'
     '\tmodel VARCHAR(120) NOT NULL, \n'
     '\ttimestamp DATETIME, \n'
     '\tinput_tokens BIGINT NOT NULL, \n'
     '\toutput_tokens BIGINT NOT NULL, \n'
     '\tcache_write_5m_tokens BIGINT NOT NULL, \n'
     '\tcache_write_1h_tokens BIGINT NOT NULL, \n'
     '\tcache_read_tokens BIGINT NOT NULL, \n'
     '\tCONSTRAINT pk_usage_messages PRIMARY KEY (message_key)\n'
     ')'),
    'CREATE INDEX ix_usage_messages_run_key ON usage_messages (run_key)',
    ('CREATE TABLE bench_jobs (\n'
     '\tid INTEGER NOT NULL, \n'
     '\tpass_id INTEGER NOT NULL, \n'
     '\torder_index INTEGER NOT NULL, \n'
     '\ttask_id VARCHAR(200) NOT NULL, \n'
     '\tconfig_key VARCHAR(400) NOT NULL, \n'
     '\tseed BIGINT NOT NULL, \n'
     '\tstatus VARCHAR(20) NOT NULL, \n'
     '\tbench_run_id INTEGER, \n'
     '\tupdated_at DATETIME NOT NULL, \n'
     '\tCONSTRAINT pk_bench_jobs PRIMARY KEY (id), \n'
     '\tCONSTRAINT fk_bench_jobs_bench_run_id_bench_runs FOREIGN KEY(bench_run_id) REFERENCES bench_runs (id) ON DELETE SET NULL, \n'
     '\tCONSTRAINT fk_bench_jobs_pass_id_bench_passes FOREIGN KEY(pass_id) REFERENCES bench_passes (id) ON DELETE CASCADE, \n'
     '\tCONSTRAINT uq_bench_jobs_pass_id UNIQUE (pass_id, order_index)\n'
     ')'),
    'CREATE INDEX ix_bench_jobs_pass_id ON bench_jobs (pass_id)',
    ('CREATE TABLE checkpoint_terms (\n'
     '\tcheckpoint_id INTEGER NOT NULL, \n'
     '\tterm VARCHAR(64) NOT NULL, \n'
     '\tcaptured_at DATETIME NOT NULL, \n'
     '\tsession_id VARCHAR(200) NOT NULL, \n'
     '\tCONSTRAINT pk_checkpoint_terms PRIMARY KEY (checkpoint_id, term), \n'
     '\tCONSTRAINT fk_checkpoint_terms_checkpoint_id_checkpoints FOREIGN KEY(checkpoint_id) REFERENCES checkpoints (id) ON DELETE CASCADE\n'
     ')'),
    'CREATE INDEX ix_checkpoint_terms_lookup ON checkpoint_terms (term, captured_at, checkpoint_id, session_id)',
    ('CREATE TABLE rules (\n'
     '\tid INTEGER NOT NULL, \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\tbody VARCHAR(400) NOT NULL, \n'
     '\tscope VARCHAR(200), \n'
     '\tstate VARCHAR(20) NOT NULL, \n'
     '\tevict_reason VARCHAR(40), \n'
     '\tstrikes INTEGER NOT NULL, \n'
     '\trent_tokens INTEGER NOT NULL, \n'
     '\torigin VARCHAR(40) NOT NULL, \n'
     '\tprovenance_run_id INTEGER, \n'
     '\tprovenance_digest JSON NOT NULL, \n'
     '\tclaimed_evidence JSON, \n'
     '\tmeasured_saving FLOAT, \n'
     '\tcreated_at DATETIME NOT NULL, \n'
     '\tdecided_at DATETIME, \n'
     "\tupdated_at DATETIME NOT NULL, undecided_tokens FLOAT DEFAULT '0' NOT NULL, \n"
     '\tCONSTRAINT pk_rules PRIMARY KEY (id), \n'
     '\tCONSTRAINT fk_rules_provenance_run_id_session_runs FOREIGN KEY(provenance_run_id) REFERENCES session_runs (id) ON DELETE SET NULL\n'
     ')'),
    'CREATE INDEX ix_rules_agent_state ON rules (agent, state)',
    ('CREATE TABLE receipts (\n'
     '\tid INTEGER NOT NULL, \n'
     '\trule_id INTEGER NOT NULL, \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\tkind VARCHAR(20) NOT NULL, \n'
     '\tverdict VARCHAR(30) NOT NULL, \n'
     '\treason TEXT NOT NULL, \n'
     '\tstate_after VARCHAR(20) NOT NULL, \n'
     '\testimate FLOAT NOT NULL, \n'
     '\tci_low FLOAT NOT NULL, \n'
     '\tci_high FLOAT NOT NULL, \n'
     '\tmargin FLOAT NOT NULL, \n'
     '\trent INTEGER NOT NULL, \n'
     '\tk FLOAT NOT NULL, \n'
     '\tn_per_side JSON NOT NULL, \n'
     '\tpaired_diffs JSON NOT NULL, \n'
     '\tpass_counts JSON NOT NULL, \n'
     '\ttokens_spent FLOAT NOT NULL, \n'
     '\traw_tokens_spent BIGINT NOT NULL, \n'
     '\tmodel VARCHAR(120) NOT NULL, \n'
     '\tbackend VARCHAR(40) NOT NULL, \n'
     '\tsuite_hash VARCHAR(64) NOT NULL, \n'
     '\tfixture_hash VARCHAR(64) NOT NULL, \n'
     '\twarden_version VARCHAR(40) NOT NULL, \n'
     '\truleset_version INTEGER, \n'
     '\tmethod JSON NOT NULL, \n'
     '\tprovenance_digest JSON NOT NULL, \n'
     '\tevidence JSON NOT NULL, \n'
     '\tcreated_at DATETIME NOT NULL, \n'
     '\tCONSTRAINT pk_receipts PRIMARY KEY (id), \n'
     '\tCONSTRAINT fk_receipts_rule_id_rules FOREIGN KEY(rule_id) REFERENCES rules (id) ON DELETE CASCADE\n'
     ')'),
    'CREATE INDEX ix_receipts_rule_id ON receipts (rule_id)',
    ('CREATE TABLE "checkpoints" (\n'
     '\tid INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, \n'
     '\trun_key VARCHAR(300) NOT NULL, \n'
     '\tsession_id VARCHAR(200) NOT NULL, \n'
     '\tagent_id VARCHAR(200), \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\tproject TEXT, \n'
     '\tprojects JSON NOT NULL, \n'
     '\t"trigger" VARCHAR(40) NOT NULL, \n'
     '\tfill FLOAT NOT NULL, \n'
     '\tquality FLOAT NOT NULL, \n'
     '\tactive_task TEXT NOT NULL, \n'
     '\tdecisions JSON NOT NULL, \n'
     '\tedited_files JSON NOT NULL, \n'
     '\tread_files JSON NOT NULL, \n'
     '\topen_questions JSON NOT NULL, \n'
     '\terrors JSON NOT NULL, \n'
     '\tlast_state TEXT NOT NULL, \n'
     '\tcaptured_at DATETIME NOT NULL, \n'
     '\tcreated_at DATETIME NOT NULL, \n'
     '\tCONSTRAINT uq_checkpoints_run_key UNIQUE (run_key, "trigger")\n'
     ')'),
    'CREATE INDEX ix_checkpoints_agent_time ON checkpoints (agent, captured_at)',
    'CREATE INDEX ix_checkpoints_captured_at ON checkpoints (captured_at)',
    'CREATE INDEX ix_checkpoints_session_id ON checkpoints (session_id)',
    'CREATE INDEX ix_session_runs_agent_started ON session_runs (agent, started_at, id)',
    ('CREATE TABLE "baselines" (\n'
     '\tid INTEGER NOT NULL, \n'
     '\tagent VARCHAR(200) NOT NULL, \n'
     '\ttask_id VARCHAR(200) NOT NULL, \n'
     '\tbackend VARCHAR(40) NOT NULL, \n'
     '\tmodel VARCHAR(120) NOT NULL, \n'
     '\trun1_weighted FLOAT NOT NULL, \n'
     '\trun1_run_id INTEGER, \n'
     '\tbest_weighted FLOAT NOT NULL, \n'
     '\tbest_run_id INTEGER, \n'
     '\tfrozen_at DATETIME NOT NULL, \n'
     '\tupdated_at DATETIME NOT NULL, \n'
     '\tfixture_hash VARCHAR(64) NOT NULL, \n'
     '\tCONSTRAINT pk_baselines PRIMARY KEY (id), \n'
     '\tCONSTRAINT fk_baselines_run1_run_id_bench_runs FOREIGN KEY(run1_run_id) REFERENCES bench_runs (id) ON DELETE SET NULL, \n'
     '\tCONSTRAINT fk_baselines_best_run_id_bench_runs FOREIGN KEY(best_run_id) REFERENCES bench_runs (id) ON DELETE SET NULL, \n'
     '\tCONSTRAINT uq_baselines_agent UNIQUE (agent, task_id, backend, model, fixture_hash)\n'
     ')'),
)


def migrated_statements() -> tuple[str, tuple[str, ...]]:
    """(revision, statements) of a database Alembic migrates to head now: the tables and indexes
    it made, in the order it made them (SQLite makes sqlite_sequence and the indexes its
    constraints need itself)."""
    import sqlite3
    import tempfile
    from pathlib import Path

    from warden.store.db import current_revision, make_engine, upgrade

    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / "head.db"
        engine = make_engine(f"sqlite:///{database}")
        try:
            upgrade(engine)
            revision = current_revision(engine)
        finally:
            engine.dispose()
        con = sqlite3.connect(database)
        try:
            statements = tuple(sql for (sql,) in con.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name != 'sqlite_sequence' ORDER BY rowid"))
        finally:
            con.close()
    assert revision is not None
    return revision, statements


if __name__ == "__main__":
    revision, statements = migrated_statements()
    print(f"REVISION = {revision!r}")
    print("STATEMENTS: tuple[str, ...] = (")
    for statement in statements:  # a line of source per line of SQL
        print("    (" + "\n     ".join(map(repr, statement.splitlines(keepends=True))) + "),")
    print(")")
