// Package parquetrows holds what the sinks that write Parquet share: the typed columns a
// JSON payload fills (their types, with the other spellings a file may use, the JSON
// value each accepts, the Parquet node each is), the codecs, and a [Writer] that ends a
// row group by rows and by bytes. It knows nothing of objects, tables or keys: the S3
// sink builds its objects with it, a table sink its data files.
package parquetrows
