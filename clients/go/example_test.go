package cowkv_test

import (
	"context"
	"errors"
	"fmt"

	"cowkv.dev/cowkv"
)

// The README's example (compiled, not run: it needs a server).
func Example() {
	ctx, token := context.Background(), "secret"
	run := func() error {
		db, err := cowkv.Dial(ctx, "127.0.0.1:7420", cowkv.WithToken(token))
		if err != nil {
			return err
		}
		defer db.Close()
		sv := db.Subvolume("default")
		if _, err := sv.Put(ctx, []byte("greeting"), []byte("hello")); err != nil {
			return err
		}
		if _, err := sv.Get(ctx, []byte("missing")); errors.Is(err, cowkv.ErrNotFound) {
			fmt.Println("absent")
		}
		for kv, err := range sv.Range(ctx, cowkv.Prefix([]byte("user/")), cowkv.PageSize(500)) {
			if err != nil {
				return err
			}
			fmt.Printf("%s=%s\n", kv.Key, kv.Value)
		}
		return sv.RunInTransaction(ctx, func(tx *cowkv.Tx) error {
			n, err := tx.Get(ctx, []byte("n"))
			if err != nil && !errors.Is(err, cowkv.ErrNotFound) {
				return err
			}
			return tx.Put(ctx, []byte("n"), append(n, '+'))
		})
	}
	_ = run
}
