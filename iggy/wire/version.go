package wire

import "fmt"

// Protocol versions, packed as major<<20 | minor<<10 | patch.
const (
	// ProtocolVersion is the version this codec speaks: 0.11.0 = 11264 (0x2C00).
	ProtocolVersion uint32 = 11 << 10 // major 0, minor 11, patch 0
	// ServerVersion is the Iggy server release whose protocol this is.
	ServerVersion = "0.9.0"
)

// PackVersion packs a semantic version; each part must be < 1024.
func PackVersion(major, minor, patch uint32) uint32 {
	return (major&0x3FF)<<20 | (minor&0x3FF)<<10 | patch&0x3FF
}

// UnpackVersion splits a packed version.
func UnpackVersion(v uint32) (major, minor, patch uint32) {
	return v >> 20 & 0x3FF, v >> 10 & 0x3FF, v & 0x3FF
}

// FormatVersion formats a packed version as "major.minor.patch".
func FormatVersion(v uint32) string {
	a, b, c := UnpackVersion(v)
	return fmt.Sprintf("%d.%d.%d", a, b, c)
}

// MinAcceptedVersion returns the lowest client version a server at serverMax accepts:
// serverMax with the patch zeroed.
func MinAcceptedVersion(serverMax uint32) uint32 { return serverMax &^ 0x3FF }

// VersionAccepted is the server's gate: a client version is accepted iff it is at
// least MinAcceptedVersion(serverMax) and has the same major.minor (any patch).
func VersionAccepted(client, serverMax uint32) bool {
	return client >= MinAcceptedVersion(serverMax) && client>>10 <= serverMax>>10
}
