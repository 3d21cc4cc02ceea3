package mongodb

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestDuplicateOfID: MongoDB's duplicate-key errors name the _id index in keyPattern and
// in the message (FerretDB, which the other tests run against, does neither); a duplicate
// on another unique index is not one of the _id.
func TestDuplicateOfID(t *testing.T) {
	raw := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ofID := raw(bson.D{{Key: "code", Value: 11000}, {Key: "keyPattern", Value: bson.D{{Key: "_id", Value: 1}}}})
	ofOther := raw(bson.D{{Key: "code", Value: 11000}, {Key: "keyPattern", Value: bson.D{{Key: "payload.k", Value: 1}}}})
	bare := raw(bson.D{{Key: "code", Value: 11000}})
	cases := []struct {
		raw  bson.Raw
		msg  string
		want bool
	}{
		{ofID, "E11000 duplicate key error", true},
		{ofOther, "E11000 duplicate key error collection: d.c index: payload.k_1 dup key: { payload.k: 3 }", false},
		{bare, `E11000 duplicate key error collection: d.c index: _id_ dup key: { _id: "s:t:0:1" }`, true},
		{bare, "E11000 duplicate key error collection: d.c", false},
	}
	for _, c := range cases {
		if got := duplicateOfID(c.raw, c.msg); got != c.want {
			t.Errorf("%s / %q: %v, want %v", c.raw, c.msg, got, c.want)
		}
	}
}
