"""Reads every object of a bucket as Parquet with pyarrow and prints one JSON line per
object: its key, its schema and its rows (partition, offset, payload as text or base64, any
other column by name).

usage: readparquet.py ENDPOINT ACCESS_KEY SECRET_KEY REGION BUCKET
"""
import base64
import json
import sys
from urllib.parse import urlparse

import pyarrow.fs as fs
import pyarrow.parquet as pq

BASE = {"stream", "topic", "partition", "offset", "id", "timestamp", "origin_timestamp", "headers", "payload"}

endpoint, access, secret, region, bucket = sys.argv[1:6]
u = urlparse(endpoint)
s3 = fs.S3FileSystem(access_key=access, secret_key=secret, region=region,
                     endpoint_override=u.netloc, scheme=u.scheme, allow_bucket_creation=False)
infos = s3.get_file_info(fs.FileSelector(bucket, recursive=True))
for info in sorted(infos, key=lambda i: i.path):
    if info.type != fs.FileType.File:
        continue
    table = pq.read_table(info.path, filesystem=s3)
    rows = []
    cols = table.to_pydict()
    for i in range(table.num_rows):
        p = cols["payload"][i]
        if isinstance(p, bytes):
            p = "base64:" + base64.b64encode(p).decode()
        headers = cols["headers"][i]
        rows.append({"partition": cols["partition"][i], "offset": cols["offset"][i], "payload": p,
                     "id": cols["id"][i], "stream": cols["stream"][i], "topic": cols["topic"][i],
                     "timestamp_us": int(cols["timestamp"][i].timestamp() * 1e6) if cols["timestamp"][i] else None,
                     "headers": dict(headers) if headers else {},
                     "columns": {c: cols[c][i] for c in cols if c not in BASE}})
    meta = pq.read_metadata(info.path, filesystem=s3)
    print(json.dumps({"key": info.path[len(bucket) + 1:], "schema": str(table.schema).replace("\n", "; "),
                      "compression": meta.row_group(0).column(0).compression if meta.num_row_groups else "",
                      "row_groups": meta.num_row_groups, "rows": rows}))
