// Usage: node read.mjs FILE.parquet
// Prints one JSON line per row of FILE as DuckDB reads it (to_json of the whole row, rows in file
// order), after one line {"types": {...}} giving DuckDB's type of each column.
import { DuckDBInstance } from '@duckdb/node-api';

const file = process.argv[2];
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const lit = `'${file.replaceAll("'", "''")}'`;
const desc = await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${lit})`);
const types = {};
for (const r of desc.getRowObjects()) types[r.column_name] = r.column_type;
console.log(JSON.stringify({ types }));
const rows = await conn.runAndReadAll(`SELECT to_json(t)::VARCHAR AS j FROM read_parquet(${lit}) t`);
for (const r of rows.getRowObjects()) console.log(r.j);
conn.closeSync();
instance.closeSync();
