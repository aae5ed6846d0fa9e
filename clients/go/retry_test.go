package cowkv_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"cowkv.dev/cowkv"
)

// TestRetriedMethodsMatchTheSpec: the list equals clients/conformance/unavailable_retry.json.
func TestRetriedMethodsMatchTheSpec(t *testing.T) {
	b, err := os.ReadFile("../conformance/unavailable_retry.json")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Methods []string `json:"methods"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec.Methods, cowkv.RetriedMethods) {
		t.Errorf("RetriedMethods = %v, the spec has %v", cowkv.RetriedMethods, spec.Methods)
	}
	_, err = cowkv.Dial(context.Background(), "127.0.0.1:1", cowkv.WithUnavailableRetry(cowkv.UnavailableRetry{MaxAttempts: 6}))
	if !errors.Is(err, cowkv.ErrInvalidArgument) {
		t.Errorf("MaxAttempts 6: %v, want ErrInvalidArgument", err)
	}
}

// TestUnavailableRetry: against a server down for the first attempt(s) that
// comes back on its port, a read succeeds with WithUnavailableRetry and
// fails fast with ErrUnavailable without it; a write is never retried.
func TestUnavailableRetry(t *testing.T) {
	bin := serverBinary(t)
	srv := startServer(t, bin, t.TempDir(), "64M", "")
	defer srv.stop()
	ctx := context.Background()
	db, err := cowkv.Dial(ctx, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Subvolume("").Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	srv.stop()
	for i, a := range srv.args {
		if a == "--listen" {
			srv.args[i+1] = srv.addr
		}
	}

	plain, _ := cowkv.Dial(ctx, srv.addr)
	defer plain.Close()
	t0 := time.Now()
	if _, err := plain.Subvolume("").Get(ctx, []byte("k")); !errors.Is(err, cowkv.ErrUnavailable) {
		t.Fatalf("without the option: %v, want ErrUnavailable", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("without the option it took %v", d)
	}
	// Backoffs of seconds: a retry comes after the channel reconnected.
	patient, _ := cowkv.Dial(ctx, srv.addr, cowkv.WithUnavailableRetry(cowkv.UnavailableRetry{
		InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Second}))
	defer patient.Close()
	if _, err := patient.Subvolume("").Put(ctx, []byte("k"), []byte("w")); !errors.Is(err, cowkv.ErrUnavailable) {
		t.Fatalf("a put with the option: %v, want ErrUnavailable (never retried)", err)
	}
	started := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		srv.start()
		close(started)
	}()
	t0 = time.Now()
	v, err := patient.Subvolume("").Get(ctx, []byte("k"))
	<-started
	if err != nil || string(v) != "v" {
		t.Fatalf("with the option: %v %q", err, v)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("answered after %v, before the server was back", d)
	}
}
