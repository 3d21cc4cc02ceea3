"""Print every document of a MongoDB collection, one JSON line each, in _id order.

The tests' independent reader: pymongo, not the Go driver the sink writes with. Each line
is {"keys": the document's field names in their stored order, "doc": the document in
MongoDB Extended JSON, canonical mode} (so a binary payload, an int32 and a date keep
their BSON types).

    python readdocs.py URI DATABASE COLLECTION
"""

import sys

from bson import json_util
from pymongo import MongoClient


def main():
    uri, database, collection = sys.argv[1:4]
    client = MongoClient(uri, serverSelectionTimeoutMS=20000)
    try:
        coll = client[database][collection]
        out = sys.stdout
        for doc in coll.find({}).sort("_id", 1):
            line = {"keys": list(doc.keys()), "doc": doc}
            out.write(json_util.dumps(line, json_options=json_util.CANONICAL_JSON_OPTIONS))
            out.write("\n")
    finally:
        client.close()


if __name__ == "__main__":
    main()
