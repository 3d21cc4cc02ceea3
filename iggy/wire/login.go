package wire

// Login and logout.
//   - Login sends operation Register (1) with session 0 and request 0; codes 40 (password)
//     and 45 (PAT) never appear on the wire and the body shape is not tagged: a server
//     decodes the ClientVersionInfo prefix, then tries the password shape, then the PAT
//     shape ([DecodeLogin]).
//   - The reply is result-framed: [0][user_id u32][session u64][protocol u32][version Name].
//   - Logout sends operation Logout (3), empty body, and needs session > 0 and request > 0
//     in its header or upstream drops it unanswered.

import (
	"encoding/binary"
	"fmt"
)

// ClientVersionInfo starts every login body: [protocol_version u32][sdk_name Name]
// [sdk_version Name].
type ClientVersionInfo struct {
	ProtocolVersion uint32 // packed, see PackVersion
	SDKName         string
	SDKVersion      string
}

func appendVersionInfo(dst []byte, v ClientVersionInfo) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, v.ProtocolVersion)
	dst = AppendName(dst, v.SDKName)
	return AppendName(dst, v.SDKVersion)
}

// DecodeClientVersionInfo decodes the prefix of a login body and returns the rest. A
// failure means Eviction 15 (MalformedLogin).
func DecodeClientVersionInfo(body []byte) (ClientVersionInfo, []byte, error) {
	r := NewReader(body)
	v := ClientVersionInfo{ProtocolVersion: r.U32(), SDKName: r.Name(), SDKVersion: r.Name()}
	if err := r.Err(); err != nil {
		return v, nil, fmt.Errorf("wire: login version prefix: %w", err)
	}
	return v, body[r.Offset():], nil
}

// PasswordCredentials is the password shape after the prefix: [username Name]
// [password_len u8][password][context_len u32][context]. The wire allows a password of
// 0..255 bytes; the 3..100 / 3..50 rules are the server's (InvalidCredentials).
type PasswordCredentials struct {
	Username, Password, Context string
}

// TokenCredentials is the PAT shape after the prefix: [token_len u8][token]
// [context_len u32][context].
type TokenCredentials struct {
	Token, Context string
}

// DecodePasswordShape decodes rest (the bytes after the prefix) as the password shape.
// Trailing bytes are ignored, as upstream does.
func DecodePasswordShape(rest []byte) (PasswordCredentials, error) {
	r := NewReader(rest)
	c := PasswordCredentials{Username: r.Name(), Password: r.ShortString(), Context: r.LongString()}
	return c, finishLenient(&r, "login password shape")
}

// DecodeTokenShape decodes rest as the PAT shape. Trailing bytes are ignored.
func DecodeTokenShape(rest []byte) (TokenCredentials, error) {
	r := NewReader(rest)
	c := TokenCredentials{Token: r.ShortString(), Context: r.LongString()}
	return c, finishLenient(&r, "login token shape")
}

// LoginAttempt is a login body decoded the way the server must: the prefix, then
// each shape that decodes. Both shapes may decode (e.g. an empty password); the server
// then verifies the password first and, if that fails, lets the PAT verdict win.
type LoginAttempt struct {
	Client      ClientVersionInfo
	Password    PasswordCredentials
	HasPassword bool
	Token       TokenCredentials
	HasToken    bool
}

// DecodeLogin decodes a Register body. It fails only when the version prefix does not
// decode (Eviction 15); a body where neither shape decodes has both Has flags false
// (also Eviction 15, after the version gate).
func DecodeLogin(body []byte) (LoginAttempt, error) {
	v, rest, err := DecodeClientVersionInfo(body)
	if err != nil {
		return LoginAttempt{}, err
	}
	a := LoginAttempt{Client: v}
	if c, err := DecodePasswordShape(rest); err == nil {
		a.Password, a.HasPassword = c, true
	}
	if c, err := DecodeTokenShape(rest); err == nil {
		a.Token, a.HasToken = c, true
	}
	return a, nil
}

// LoginPasswordRequest is a password login (code 40, sent as OpRegister).
type LoginPasswordRequest struct {
	Client ClientVersionInfo
	PasswordCredentials
}

// Code returns CodeLoginRegister.
func (LoginPasswordRequest) Code() Code { return CodeLoginRegister }

// Append appends the encoding of the LoginPasswordRequest to dst.
func (q LoginPasswordRequest) Append(dst []byte) []byte {
	dst = appendVersionInfo(dst, q.Client)
	dst = AppendName(dst, q.Username)
	dst = append(dst, byte(len(q.Password)))
	dst = append(dst, q.Password...)
	return AppendLongString(dst, q.Context)
}

// DecodeLoginPasswordRequest decodes a body known to be a password login.
func DecodeLoginPasswordRequest(body []byte) (LoginPasswordRequest, error) {
	v, rest, err := DecodeClientVersionInfo(body)
	if err != nil {
		return LoginPasswordRequest{}, err
	}
	c, err := DecodePasswordShape(rest)
	return LoginPasswordRequest{Client: v, PasswordCredentials: c}, err
}

// LoginPATRequest is a personal-access-token login (code 45, sent as OpRegister).
type LoginPATRequest struct {
	Client ClientVersionInfo
	TokenCredentials
}

// Code returns CodeLoginRegisterWithPAT.
func (LoginPATRequest) Code() Code { return CodeLoginRegisterWithPAT }

// Append appends the encoding of the LoginPATRequest to dst.
func (q LoginPATRequest) Append(dst []byte) []byte {
	dst = appendVersionInfo(dst, q.Client)
	dst = append(dst, byte(len(q.Token)))
	dst = append(dst, q.Token...)
	return AppendLongString(dst, q.Context)
}

// DecodeLoginPATRequest decodes a body known to be a PAT login.
func DecodeLoginPATRequest(body []byte) (LoginPATRequest, error) {
	v, rest, err := DecodeClientVersionInfo(body)
	if err != nil {
		return LoginPATRequest{}, err
	}
	c, err := DecodeTokenShape(rest)
	return LoginPATRequest{Client: v, TokenCredentials: c}, err
}

// LoginReply is the login reply payload (after the result section):
// [user_id u32][session u64][server_protocol_version u32][server_version Name].
type LoginReply struct {
	UserID                uint32
	Session               uint64
	ServerProtocolVersion uint32
	ServerVersion         string
}

// Append appends the encoding of the LoginReply to dst.
func (l LoginReply) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, l.UserID)
	dst = binary.LittleEndian.AppendUint64(dst, l.Session)
	dst = binary.LittleEndian.AppendUint32(dst, l.ServerProtocolVersion)
	return AppendName(dst, l.ServerVersion)
}

// DecodeLoginReply decodes the login reply payload.
func DecodeLoginReply(p []byte) (LoginReply, error) {
	r := NewReader(p)
	l := LoginReply{UserID: r.U32(), Session: r.U64(), ServerProtocolVersion: r.U32(), ServerVersion: r.Name()}
	return l, finish(&r, "LoginReply")
}

// LogoutRequest is code 39, sent as OpLogout with an empty body; the reply is empty.
type LogoutRequest struct{}

// Code returns CodeLogoutUser.
func (LogoutRequest) Code() Code { return CodeLogoutUser }

// Append appends the encoding of the LogoutRequest to dst.
func (LogoutRequest) Append(dst []byte) []byte { return dst }

// DecodeLogoutRequest ignores body.
func DecodeLogoutRequest([]byte) (LogoutRequest, error) { return LogoutRequest{}, nil }
