package wire

// Personal access tokens.
//   - CreatePersonalAccessToken (42, op 146): [name Name][expiry u64] (a duration in µs
//     from creation; 0 and u64::MAX = never) → RawToken ([token Name]), shown once.
//   - DeletePersonalAccessToken (43, op 147): [name Name] → ∅ (R:20 not found).
//   - GetPersonalAccessTokens (41, op 2): ∅ → [name Name][expiry_at u64] repeated to the
//     end (expiry_at absolute µs, 0 = never).

import "encoding/binary"

// CreatePATRequest is code 42.
type CreatePATRequest struct {
	Name   string
	Expiry uint64 // µs from creation; 0 or ^uint64(0) = never
}

// Code returns CodeCreatePAT.
func (CreatePATRequest) Code() Code { return CodeCreatePAT }

// Append appends the encoding of the CreatePATRequest to dst.
func (q CreatePATRequest) Append(dst []byte) []byte {
	return binary.LittleEndian.AppendUint64(AppendName(dst, q.Name), q.Expiry)
}

// DecodeCreatePATRequest decodes code 42.
func DecodeCreatePATRequest(body []byte) (CreatePATRequest, error) {
	r := NewReader(body)
	q := CreatePATRequest{r.Name(), r.U64()}
	return q, finish(&r, "CreatePersonalAccessToken")
}

// DeletePATRequest is code 43.
type DeletePATRequest struct{ Name string }

// Code returns CodeDeletePAT.
func (DeletePATRequest) Code() Code { return CodeDeletePAT }

// Append appends the encoding of the DeletePATRequest to dst.
func (q DeletePATRequest) Append(dst []byte) []byte { return AppendName(dst, q.Name) }

// DecodeDeletePATRequest decodes code 43.
func DecodeDeletePATRequest(body []byte) (DeletePATRequest, error) {
	r := NewReader(body)
	q := DeletePATRequest{r.Name()}
	return q, finish(&r, "DeletePersonalAccessToken")
}

// GetPATsRequest is code 41 (empty body).
type GetPATsRequest struct{}

// Code returns CodeGetPATs.
func (GetPATsRequest) Code() Code { return CodeGetPATs }

// Append appends the encoding of the GetPATsRequest to dst.
func (GetPATsRequest) Append(dst []byte) []byte { return dst }

// DecodeGetPATsRequest ignores body.
func DecodeGetPATsRequest([]byte) (GetPATsRequest, error) { return GetPATsRequest{}, nil }

// RawToken is the CreatePersonalAccessToken reply payload: [token Name].
type RawToken struct{ Token string }

// Append appends the encoding of the RawToken to dst.
func (t RawToken) Append(dst []byte) []byte { return AppendName(dst, t.Token) }

// DecodeRawToken decodes a CreatePersonalAccessToken reply payload.
func DecodeRawToken(p []byte) (RawToken, error) {
	r := NewReader(p)
	t := RawToken{r.Name()}
	return t, finish(&r, "RawToken")
}

// PATInfo is one GetPersonalAccessTokens entry.
type PATInfo struct {
	Name     string
	ExpiryAt uint64 // absolute µs since the epoch; 0 = never
}

// AppendPATs encodes a GetPersonalAccessTokens reply payload.
func AppendPATs(dst []byte, pats []PATInfo) []byte {
	for _, p := range pats {
		dst = binary.LittleEndian.AppendUint64(AppendName(dst, p.Name), p.ExpiryAt)
	}
	return dst
}

// DecodePATs decodes a GetPersonalAccessTokens reply payload.
func DecodePATs(p []byte) ([]PATInfo, error) {
	r := NewReader(p)
	var out []PATInfo
	for r.Remaining() > 0 {
		out = append(out, PATInfo{r.Name(), r.U64()})
	}
	return out, finish(&r, "GetPersonalAccessTokens reply")
}
