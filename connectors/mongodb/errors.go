package mongodb

import (
	"context"
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// MongoDB's error codes the sink tells apart.
const (
	codeDuplicateKey         = 11000
	codeNamespaceExists      = 48
	codeAuthFailed           = 18
	codeUnauthorized         = 13
	codeMechanismUnavailable = 334
)

// transientCodes are the codes after which the same write can succeed: the driver's
// retryable ones (a primary stepping down, a server shutting down, the network), plus a
// time limit, a write conflict and lock timeouts.
var transientCodes = map[int]bool{
	6: true, 7: true, 24: true, 46: true, 50: true, 89: true, 91: true, 112: true, 134: true, 189: true,
	262: true, 9001: true, 10107: true, 11600: true, 11602: true, 13435: true, 13436: true,
}

func transientCode(code int) bool { return transientCodes[code] }

// transient says whether a failed insertMany is worth another attempt: the network,
// server selection, a timeout, a retryable label or code, a write concern not satisfied
// yet. Anything else (an authorization refusal, a malformed command) fails the batch at
// once, to the runtime's [retry] and on_failure.
func transient(err error) bool {
	if lostConnection(err) || mongo.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var le mongo.LabeledError
	if errors.As(err, &le) && (le.HasErrorLabel("RetryableWriteError") || le.HasErrorLabel("NetworkError")) {
		return true
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && bwe.WriteConcernError != nil {
		return true
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return transientCode(int(ce.Code))
	}
	return errors.As(err, &bwe) // write errors left over are transient ones (insert returned them)
}

// lostConnection says whether err means no server could be reached: the runtime waits
// for it without counting (sdk.ErrNotConnected).
func lostConnection(err error) bool {
	if mongo.IsNetworkError(err) || errors.Is(err, mongo.ErrClientDisconnected) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "server selection error") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "connection() error")
}

// isAuthError says whether the server refused the credentials.
func isAuthError(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == codeAuthFailed || ce.Code == codeMechanismUnavailable) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "auth error") || strings.Contains(msg, "AuthenticationFailed") ||
		strings.Contains(msg, "Authentication failed")
}

// duplicateOfID says whether a duplicate-key write error is about the _id index: MongoDB
// names the key in keyPattern, and the index in its message ("index: _id_"); FerretDB does
// neither (then the sink looks the _id up).
func duplicateOfID(raw bson.Raw, msg string) bool {
	if strings.Contains(msg, " index: _id_ ") {
		return true
	}
	kp, err := raw.LookupErr("keyPattern")
	if err != nil {
		return false
	}
	doc, ok := kp.DocumentOK()
	if !ok {
		return false
	}
	elems, err := doc.Elements()
	return err == nil && len(elems) == 1 && elems[0].Key() == "_id"
}

// namesIndex says whether a duplicate-key write error says which index it broke (MongoDB
// does, in keyPattern and in its message; FerretDB does not).
func namesIndex(raw bson.Raw, msg string) bool {
	if strings.Contains(msg, " index: ") {
		return true
	}
	_, err := raw.LookupErr("keyPattern")
	return err == nil
}
