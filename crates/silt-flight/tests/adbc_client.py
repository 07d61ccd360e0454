"""A real Flight SQL client against the test server: ADBC's Flight SQL driver (Go, through
adbc-driver-manager), the one Python, R and DuckDB users reach for.

Usage: adbc_client.py URI TOKEN. Prints one JSON object (see the end) on stdout; the Rust test
(tests/adbc.rs) checks it. Exit code 3 when the driver is not installed.
"""

import datetime
import json
import sys

try:
    import adbc_driver_flightsql
    import adbc_driver_flightsql.dbapi as flight_sql
except ImportError as e:  # the Rust test skips (or fails under CI) on this
    print(f"adbc-driver-flightsql not importable: {e}", file=sys.stderr)
    sys.exit(3)


def plain(v):
    """A pyarrow value (as_py) made JSON-friendly."""
    if isinstance(v, datetime.datetime):
        return {"iso": v.isoformat(), "tz": str(v.tzinfo)}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def connect(uri, token):
    opts = {}
    if token is not None:
        opts[adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {token}"
    return flight_sql.connect(uri, db_kwargs=opts)


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        return f"{type(e).__name__}: {e}"
    return None


def main():
    uri, token = sys.argv[1], sys.argv[2]
    out = {}
    with connect(uri, token) as conn:
        # A plain statement query (CommandStatementQuery).
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM events")
            table = cur.fetch_arrow_table()
            out["schema"] = [f"{f.name}: {f.type}" for f in table.schema]
            out["rows"] = [{k: plain(v) for k, v in r.items()} for r in table.to_pylist()]

        # A prepared statement (CreatePreparedStatement, then execute it).
        with conn.cursor() as cur:
            cur.adbc_prepare("SELECT * FROM events")
            cur.execute("SELECT * FROM events")
            out["prepared_ids"] = [r[0] for r in cur.fetchall()]

        # A large result, read through.
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM big")
            big = cur.fetch_arrow_table()
            out["big_rows"] = big.num_rows
            out["big_sum"] = sum(big.column(0).to_pylist())

        # Metadata: GetSqlInfo, GetTables (with schemas), GetObjects.
        info = conn.adbc_get_info()
        out["vendor_name"] = info.get("vendor_name")
        out["vendor_version"] = info.get("vendor_version")
        schema = conn.adbc_get_table_schema("events", catalog_filter="silt", db_schema_filter="lake")
        out["table_schema"] = [f"{f.name}: {f.type}" for f in schema]
        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        out["tables"] = sorted(
            f"{c['catalog_name']}.{s['db_schema_name']}.{t['table_name']}"
            for c in objects
            for s in c["catalog_db_schemas"] or []
            for t in s["db_schema_tables"] or []
        )
        out["table_types"] = conn.adbc_get_table_types()

        # Errors: the engine's message comes through.
        def bad_query():
            with conn.cursor() as cur:
                cur.execute("SELECT * FROM nope")
                cur.fetchall()

        out["error"] = error_of(bad_query)

        def update():
            with conn.cursor() as cur:
                cur.execute("INSERT INTO events VALUES (1)")
                cur.fetchall()

        out["write_error"] = error_of(update)

    # User and password (what JDBC-style configurations have): the driver runs Handshake with
    # Basic auth, the password being the token, and carries on with the bearer it answers.
    with flight_sql.connect(uri, db_kwargs={"username": "analyst", "password": token}) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM events")
            out["basic_auth_ids"] = [r[0] for r in cur.fetchall()]

    # A wrong token is refused.
    def wrong_token():
        with connect(uri, token + "-wrong") as conn, conn.cursor() as cur:
            cur.execute("SELECT * FROM events")
            cur.fetchall()

    out["wrong_token_error"] = error_of(wrong_token)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
