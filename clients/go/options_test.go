package cowkv_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cowkv.dev/cowkv"
)

// selfSigned writes a certificate for 127.0.0.1 and its key; it returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cowkvd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

func TestTLSTokenAndDeadline(t *testing.T) {
	bin := serverBinary(t)
	dir := t.TempDir()
	certPath, keyPath, pool := selfSigned(t, dir)
	srv := startServer(t, bin, dir, "32M", "tok", "--tls-cert", certPath, "--tls-key", keyPath)
	defer srv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	db, err := cowkv.Dial(ctx, srv.addr, cowkv.WithTLS(&tls.Config{RootCAs: pool}), cowkv.WithToken("tok"),
		cowkv.WithDefaultTimeout(5*time.Second), cowkv.WithWaitReady())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sv := db.Subvolume("default")
	if _, err := sv.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := sv.Get(ctx, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("get: %q %v", v, err)
	}
	if server, api, err := db.Version(ctx); err != nil || api != "cowkv.v1" || server == "" {
		t.Fatalf("version: %q %q %v", server, api, err)
	}
	if st, err := db.Stats(ctx); err != nil || st["subvolumes"] < 1 {
		t.Fatalf("stats: %v %v", st, err)
	}

	// A plaintext client cannot talk to the TLS server.
	plain, _ := cowkv.Dial(ctx, srv.addr, cowkv.WithToken("tok"), cowkv.WithDefaultTimeout(2*time.Second))
	defer plain.Close()
	if _, err := plain.Subvolume("").Get(ctx, []byte("k")); !errors.Is(err, cowkv.ErrUnavailable) {
		t.Errorf("plaintext to TLS: %v", err)
	}
	// No token: unauthenticated.
	anon, _ := cowkv.Dial(ctx, srv.addr, cowkv.WithTLS(&tls.Config{RootCAs: pool}))
	defer anon.Close()
	if _, err := anon.Subvolume("").Get(ctx, []byte("k")); !errors.Is(err, cowkv.ErrUnauthenticated) {
		t.Errorf("no token: %v", err)
	}
	// The default deadline applies to calls without one: a tiny one expires.
	hasty, _ := cowkv.Dial(ctx, srv.addr, cowkv.WithTLS(&tls.Config{RootCAs: pool}), cowkv.WithToken("tok"),
		cowkv.WithDefaultTimeout(time.Microsecond))
	defer hasty.Close()
	_, err = hasty.Subvolume("").Get(context.Background(), []byte("k"))
	if !errors.Is(err, cowkv.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("default deadline: %v", err)
	}
	// A context deadline wins over the default.
	if _, err := hasty.Subvolume("").Get(ctx, []byte("k")); err != nil {
		t.Errorf("explicit deadline: %v", err)
	}
}
