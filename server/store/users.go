package store

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// User is a user account. Permissions is an opaque blob the server owns.
type User struct {
	ID          uint32
	Username    string
	CreatedAt   uint64
	Status      uint8
	Permissions []byte
}

// PersonalAccessToken describes a token; the raw token is never stored.
// ExpiresAt is µs since the epoch, 0 = never.
type PersonalAccessToken struct {
	UserID    uint32
	Name      string
	ExpiresAt uint64
}

type userState struct {
	User
	passwordHash string
	tokens       map[string]*tokenState
}

type tokenState struct {
	PersonalAccessToken
	hash [sha256.Size]byte
}

// Passwords are hashed with PBKDF2-HMAC-SHA256 from the standard library
// (NIST SP 800-132; no new module), with a 16-byte random salt and the
// iteration count stored in the hash: "pbkdf2-sha256$iters$salt$key".
func hashPassword(password string, iters int) (string, error) {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	dk, err := pbkdf2.Key(sha256.New, password, salt, iters, 32)
	if err != nil {
		return "", fmt.Errorf("store: hash password: %w", err)
	}
	enc := base64.RawStdEncoding
	return "pbkdf2-sha256$" + strconv.Itoa(iters) + "$" + enc.EncodeToString(salt) + "$" + enc.EncodeToString(dk), nil
}

// passwordChecks counts the key derivations of checkPassword (tests compare paths).
var passwordChecks atomic.Int64

func checkPassword(encoded, password string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 4 || parts[0] != "pbkdf2-sha256" {
		return false
	}
	iters, err := strconv.Atoi(parts[1])
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[2])
	want, err2 := enc.DecodeString(parts[3])
	if err != nil || err1 != nil || err2 != nil || iters <= 0 {
		return false
	}
	passwordChecks.Add(1)
	got, err := pbkdf2.Key(sha256.New, password, salt, iters, len(want))
	return err == nil && subtle.ConstantTimeCompare(got, want) == 1
}

// verifiedPasswords remembers, per stored password hash, a keyed digest of the password
// that last matched it, so a client that logs in again with the same password (a runtime
// opens several connections, and restarts) costs one HMAC instead of a full key derivation.
// Only matches are kept: a wrong password still pays the whole derivation, so the time of
// an answer tells nothing its content does not. The key is random per process and never
// stored; a changed password has a new hash (a new salt), so an old entry cannot match it.
type verifiedPasswords struct {
	once sync.Once
	key  []byte
	mu   sync.Mutex
	m    map[string][sha256.Size]byte // stored hash -> HMAC(key, password)
}

// maxVerified bounds the entries (one per user in practice; hashes replaced by a password
// change are only dropped when the bound clears the map).
const maxVerified = 4096

func (v *verifiedPasswords) digest(password string) [sha256.Size]byte {
	v.once.Do(func() {
		v.key = make([]byte, 32)
		_, _ = rand.Read(v.key)
		v.m = make(map[string][sha256.Size]byte)
	})
	mac := hmac.New(sha256.New, v.key)
	mac.Write([]byte(password))
	var d [sha256.Size]byte
	mac.Sum(d[:0])
	return d
}

// remembered reports whether password is the one that last matched encoded.
func (v *verifiedPasswords) remembered(encoded, password string) bool {
	d := v.digest(password)
	v.mu.Lock()
	known, ok := v.m[encoded]
	v.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(known[:], d[:]) == 1
}

// check is checkPassword, answered from the remembered matches when it can be.
func (v *verifiedPasswords) check(encoded, password string) bool {
	if v.remembered(encoded, password) {
		return true
	}
	if !checkPassword(encoded, password) {
		return false
	}
	d := v.digest(password)
	v.mu.Lock()
	if len(v.m) >= maxVerified {
		clear(v.m)
	}
	v.m[encoded] = d
	v.mu.Unlock()
	return true
}

// dummyHash returns a hash of a random password at the store's cost, made on
// first use, for Authenticate's unknown-user path.
func (s *Store) dummyHash() string {
	s.dummyOnce.Do(func() {
		pw := make([]byte, 16)
		_, _ = rand.Read(pw)
		s.dummy, _ = hashPassword(string(pw), s.iters)
	})
	return s.dummy
}

// Tokens carry 400 random bits, so a fast hash cannot be brute-forced;
// SHA-256 plays the role of upstream's BLAKE3 digest.
func hashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

func encodeUser(u *userState) []byte {
	b := appendBytes([]byte{recordVersion}, []byte(u.Username))
	b = appendBytes(b, []byte(u.passwordHash))
	b = appendU64(b, u.CreatedAt)
	b = append(b, u.Status)
	return appendBytes(b, u.Permissions)
}

func encodeToken(t *tokenState) []byte {
	return appendU64(appendBytes([]byte{recordVersion}, t.hash[:]), t.ExpiresAt)
}

func (s *Store) loadUsers() error {
	err := s.scan([]byte{kUser}, func(k, v []byte) error {
		if len(k) != 5 {
			return fmt.Errorf("%w: user key %x", ErrCorrupt, k)
		}
		r := newReader(v)
		u := &userState{tokens: map[string]*tokenState{}}
		u.ID = binary.BigEndian.Uint32(k[1:])
		u.Username, u.passwordHash, u.CreatedAt, u.Status, u.Permissions = r.str(), r.str(), r.u64(), r.u8(), r.bytes()
		s.users[u.ID] = u
		return r.done()
	})
	if err != nil {
		return err
	}
	return s.scan([]byte{kToken}, func(k, v []byte) error {
		if len(k) < 6 || s.users[binary.BigEndian.Uint32(k[1:])] == nil {
			return fmt.Errorf("%w: orphan token key %x", ErrCorrupt, k)
		}
		r := newReader(v)
		t := &tokenState{PersonalAccessToken: PersonalAccessToken{UserID: binary.BigEndian.Uint32(k[1:]), Name: string(k[5:])}}
		if h := r.bytes(); len(h) == len(t.hash) {
			copy(t.hash[:], h)
		} else if r.err == nil {
			r.err = fmt.Errorf("%w: token hash of %d bytes", ErrCorrupt, len(h))
		}
		t.ExpiresAt = r.u64()
		s.users[t.UserID].tokens[t.Name] = t
		return r.done()
	})
}

func (u *userState) export() User {
	out := u.User
	out.Permissions = slices.Clone(u.Permissions)
	return out
}

func (s *Store) userByName(name string) (*userState, bool) {
	for _, u := range s.users {
		if u.Username == name {
			return u, true
		}
	}
	return nil, false
}

func (s *Store) userLocked(id uint32) (*userState, error) {
	if s.closed {
		return nil, ErrClosed
	}
	u := s.users[id]
	if u == nil {
		return nil, fmt.Errorf("user %d: %w", id, ErrUserNotFound)
	}
	return u, nil
}

// EnsureRoot creates the root user (id 0) with the credentials unless a
// user 0 exists; created tells which. The server calls it on every boot, so
// credentials apply on first boot only. Errors: ErrInvalidName,
// ErrUserExists (another user has the name), ErrClosed.
func (s *Store) EnsureRoot(username, password string) (root User, created bool, err error) {
	s.mu.RLock()
	u, ok := s.users[0]
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return User{}, false, ErrClosed
	}
	if ok {
		return u.export(), false, nil
	}
	root, err = s.createUser(username, password, 1, nil, true)
	return root, err == nil, err
}

// SetRootCredentials makes username and password the root user's (id 0),
// which must exist; changed is false when they already were (then nothing is
// written). Errors: ErrInvalidName, ErrUserExists (another user has the
// name), ErrUserNotFound, ErrClosed.
func (s *Store) SetRootCredentials(username, password string) (changed bool, err error) {
	if err := checkName(username); err != nil {
		return false, err
	}
	s.mu.RLock()
	u := s.users[0]
	closed := s.closed
	var hash, name string
	if u != nil {
		hash, name = u.passwordHash, u.Username
	}
	s.mu.RUnlock()
	switch {
	case closed:
		return false, ErrClosed
	case u == nil:
		return false, fmt.Errorf("root user: %w", ErrUserNotFound)
	}
	if name == username && checkPassword(hash, password) {
		return false, nil
	}
	newHash, err := hashPassword(password, s.iters) // slow: outside the lock
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err = s.userLocked(0)
	if err != nil {
		return false, err
	}
	if other, found := s.userByName(username); found && other.ID != 0 {
		return false, fmt.Errorf("user %q: %w", username, ErrUserExists)
	}
	upd := *u
	upd.Username, upd.passwordHash = username, newHash
	b := s.db.NewBatch()
	_ = b.Set(key(kUser, 0), encodeUser(&upd), nil)
	if err := s.commit(b, "set root credentials"); err != nil {
		return false, err
	}
	u.Username, u.passwordHash = username, newHash
	return true, nil
}

// CreateUser creates a user with the lowest free id. Errors:
// ErrInvalidName, ErrUserExists, ErrLimit, ErrClosed.
func (s *Store) CreateUser(username, password string, status uint8, permissions []byte) (User, error) {
	return s.createUser(username, password, status, permissions, false)
}

func (s *Store) createUser(username, password string, status uint8, perms []byte, root bool) (User, error) {
	if err := checkName(username); err != nil {
		return User{}, err
	}
	hash, err := hashPassword(password, s.iters) // slow: outside the lock
	if err != nil {
		return User{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return User{}, ErrClosed
	}
	if root && s.users[0] != nil {
		return s.users[0].export(), nil
	}
	if _, found := s.userByName(username); found {
		return User{}, fmt.Errorf("user %q: %w", username, ErrUserExists)
	}
	id, ok := lowestFree(s.users, 1<<31)
	if !ok {
		return User{}, fmt.Errorf("create user %q: %w", username, ErrLimit)
	}
	u := &userState{User: User{ID: id, Username: username, CreatedAt: nowMicros(), Status: status, Permissions: slices.Clone(perms)},
		passwordHash: hash, tokens: map[string]*tokenState{}}
	b := s.db.NewBatch()
	_ = b.Set(key(kUser, id), encodeUser(u), nil)
	if err := s.commit(b, "create user"); err != nil {
		return User{}, err
	}
	s.users[id] = u
	return u.export(), nil
}

// ChangePassword replaces a user's password. Errors: ErrUserNotFound, ErrClosed.
func (s *Store) ChangePassword(id uint32, password string) error {
	hash, err := hashPassword(password, s.iters)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.userLocked(id)
	if err != nil {
		return err
	}
	upd := *u
	upd.passwordHash = hash
	b := s.db.NewBatch()
	_ = b.Set(key(kUser, id), encodeUser(&upd), nil)
	if err := s.commit(b, "change password"); err != nil {
		return err
	}
	u.passwordHash = hash
	return nil
}

// DeleteUser deletes a user and its tokens. Refusing to delete root is the
// server's policy. Errors: ErrUserNotFound, ErrClosed.
func (s *Store) DeleteUser(id uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.userLocked(id); err != nil {
		return err
	}
	b := s.db.NewBatch()
	_ = b.Delete(key(kUser, id), nil)
	pre := key(kToken, id)
	_ = b.DeleteRange(pre, prefixEnd(pre), nil)
	if err := s.commit(b, "delete user"); err != nil {
		return err
	}
	delete(s.users, id)
	return nil
}

// User returns a user by id. Errors: ErrUserNotFound, ErrClosed.
func (s *Store) User(id uint32) (User, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, err := s.userLocked(id)
	if err != nil {
		return User{}, err
	}
	return u.export(), nil
}

// UserByName returns a user by exact username. Errors: ErrUserNotFound, ErrClosed.
func (s *Store) UserByName(username string) (User, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return User{}, ErrClosed
	}
	u, ok := s.userByName(username)
	if !ok {
		return User{}, fmt.Errorf("user %q: %w", username, ErrUserNotFound)
	}
	return u.export(), nil
}

// Users returns all users ordered by id.
func (s *Store) Users() ([]User, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make([]User, 0, len(s.users))
	for _, id := range sortedKeys(s.users) {
		out = append(out, s.users[id].export())
	}
	return out, nil
}

// Authenticate checks a username and password (slow by design: PBKDF2; a
// password that matched this user's hash before costs an HMAC). It does not
// check Status. Errors: ErrInvalidCredentials, ErrClosed.
func (s *Store) Authenticate(username, password string) (User, error) {
	s.mu.RLock()
	u, ok := s.userByName(username)
	closed := s.closed
	var hash string
	var out User
	if ok {
		hash, out = u.passwordHash, u.export()
	}
	s.mu.RUnlock()
	if closed {
		return User{}, ErrClosed
	}
	if !ok {
		// Hash anyway, so an unknown user costs what a wrong password does and user
		// names cannot be told apart by timing.
		checkPassword(s.dummyHash(), password)
		return User{}, fmt.Errorf("user %q: %w", username, ErrInvalidCredentials)
	}
	if !s.verified.check(hash, password) {
		return User{}, fmt.Errorf("user %q: %w", username, ErrInvalidCredentials)
	}
	return out, nil
}

// AuthenticateRemembered is Authenticate without a key derivation: ok is true when
// password is the one that last matched the user's stored hash (one HMAC, see
// verifiedPasswords), and false when only Authenticate can tell (an unknown user, a
// wrong password, a right one not checked since the process started). The server
// answers such logins without waiting for a password-hash slot. Errors: ErrClosed.
func (s *Store) AuthenticateRemembered(username, password string) (User, bool, error) {
	s.mu.RLock()
	u, ok := s.userByName(username)
	closed := s.closed
	var hash string
	var out User
	if ok {
		hash, out = u.passwordHash, u.export()
	}
	s.mu.RUnlock()
	switch {
	case closed:
		return User{}, false, ErrClosed
	case ok && s.verified.remembered(hash, password):
		return out, true, nil
	}
	return User{}, false, nil
}

// CreateToken creates a personal access token for the user and returns the
// raw token (standard base64 of 50 random bytes, as upstream), which is
// shown once: only its SHA-256 is stored. expiresAt is absolute µs, 0 =
// never (the server checks it is in the future). Errors: ErrInvalidName,
// ErrUserNotFound, ErrTokenLimit (checked first), ErrTokenExists, ErrClosed.
func (s *Store) CreateToken(userID uint32, name string, expiresAt uint64) (string, PersonalAccessToken, error) {
	if err := checkName(name); err != nil {
		return "", PersonalAccessToken{}, err
	}
	raw := make([]byte, 50)
	_, _ = rand.Read(raw)
	token := base64.StdEncoding.EncodeToString(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.userLocked(userID)
	if err != nil {
		return "", PersonalAccessToken{}, err
	}
	if len(u.tokens) >= MaxTokensPerUser {
		return "", PersonalAccessToken{}, fmt.Errorf("user %d: %w", userID, ErrTokenLimit)
	}
	if u.tokens[name] != nil {
		return "", PersonalAccessToken{}, fmt.Errorf("user %d token %q: %w", userID, name, ErrTokenExists)
	}
	t := &tokenState{PersonalAccessToken: PersonalAccessToken{UserID: userID, Name: name, ExpiresAt: expiresAt}, hash: hashToken(token)}
	b := s.db.NewBatch()
	_ = b.Set(append(key(kToken, userID), name...), encodeToken(t), nil)
	if err := s.commit(b, "create token"); err != nil {
		return "", PersonalAccessToken{}, err
	}
	u.tokens[name] = t
	return token, t.PersonalAccessToken, nil
}

// DeleteToken deletes a user's token. Errors: ErrUserNotFound,
// ErrTokenNotFound, ErrClosed.
func (s *Store) DeleteToken(userID uint32, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.userLocked(userID)
	if err != nil {
		return err
	}
	if u.tokens[name] == nil {
		return fmt.Errorf("user %d token %q: %w", userID, name, ErrTokenNotFound)
	}
	b := s.db.NewBatch()
	_ = b.Delete(append(key(kToken, userID), name...), nil)
	if err := s.commit(b, "delete token"); err != nil {
		return err
	}
	delete(u.tokens, name)
	return nil
}

// DeleteExpiredTokens deletes the user's tokens that expired at now (µs) and returns
// how many it deleted. The server calls it before listing or creating a user's tokens, so
// an expired token is neither listed nor counted against MaxTokensPerUser and its name
// can be used again (upstream's token cleaner does this periodically). Errors:
// ErrUserNotFound, ErrClosed.
func (s *Store) DeleteExpiredTokens(userID uint32, now uint64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.userLocked(userID)
	if err != nil {
		return 0, err
	}
	var expired []string
	for name, t := range u.tokens {
		if t.ExpiresAt != 0 && t.ExpiresAt <= now {
			expired = append(expired, name)
		}
	}
	if len(expired) == 0 {
		return 0, nil
	}
	b := s.db.NewBatch()
	for _, name := range expired {
		_ = b.Delete(append(key(kToken, userID), name...), nil)
	}
	if err := s.commit(b, "delete expired tokens"); err != nil {
		return 0, err
	}
	for _, name := range expired {
		delete(u.tokens, name)
	}
	return len(expired), nil
}

// Tokens returns the user's tokens ordered by name. Errors: ErrUserNotFound, ErrClosed.
func (s *Store) Tokens(userID uint32) ([]PersonalAccessToken, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, err := s.userLocked(userID)
	if err != nil {
		return nil, err
	}
	out := make([]PersonalAccessToken, 0, len(u.tokens))
	for _, t := range u.tokens {
		out = append(out, t.PersonalAccessToken)
	}
	slices.SortFunc(out, func(a, b PersonalAccessToken) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// AuthenticateToken returns the user owning the raw token if it has not
// expired at now (µs). Errors: ErrInvalidToken, ErrClosed.
func (s *Store) AuthenticateToken(token string, now uint64) (User, error) {
	h := hashToken(token)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return User{}, ErrClosed
	}
	for _, u := range s.users {
		for _, t := range u.tokens {
			if subtle.ConstantTimeCompare(t.hash[:], h[:]) == 1 {
				if t.ExpiresAt != 0 && t.ExpiresAt <= now {
					return User{}, fmt.Errorf("token %q of user %d expired: %w", t.Name, u.ID, ErrInvalidToken)
				}
				return u.export(), nil
			}
		}
	}
	return User{}, ErrInvalidToken
}
