package iggy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// selfSigned returns a server TLS config for 127.0.0.1 and a client pool trusting it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}

func TestTLSAndTokenLogin(t *testing.T) {
	srvTLS, roots := selfSigned(t)
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) { c.TLS = srvTLS }))
	c := dial(t, s, iggy.WithTLS(&tls.Config{RootCAs: roots}))
	ctx := testCtx(t)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	token, err := c.CreatePersonalAccessToken(ctx, "ci", 0)
	if err != nil || token == "" {
		t.Fatalf("create token = %q, %v", token, err)
	}
	pc := dial(t, s, iggy.WithTLS(&tls.Config{RootCAs: roots}), iggy.WithToken(token))
	me, err := pc.GetMe(ctx)
	if err != nil || me.UserID != 0 {
		t.Fatalf("token login: %+v, %v", me, err)
	}
	// Plain TCP against a TLS server fails to connect.
	if _, err := iggy.Dial(ctx, s.Addr(), iggy.WithRequestTimeout(time.Second), iggy.WithLogger(quietLogger())); err == nil {
		t.Fatal("plain dial to a TLS server succeeded")
	}
}
