// The Go quickstart of clients/install_test.sh: built in an empty module
// that uses cowkv.dev/cowkv by path. Usage: quickstart HOST:PORT SUBVOLUME.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"cowkv.dev/cowkv"
)

func run(ctx context.Context, addr, name string) error {
	db, err := cowkv.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.CreateSubvolume(ctx, name); err != nil {
		return err
	}
	sv := db.Subvolume(name)
	for k, v := range map[string]string{"user/1": "alice", "user/2": "bob"} {
		if _, err := sv.Put(ctx, []byte(k), []byte(v)); err != nil {
			return err
		}
	}
	v, err := sv.Get(ctx, []byte("user/1"))
	if err != nil {
		return err
	}
	users := 0
	for _, err := range sv.Range(ctx, cowkv.Prefix([]byte("user/"))) {
		if err != nil {
			return err
		}
		users++
	}
	var n int
	err = sv.Txn(ctx, func(tx *cowkv.Tx) error { // retried on conflict
		old, err := tx.Get(ctx, []byte("n"))
		if err != nil && !errors.Is(err, cowkv.ErrNotFound) {
			return err
		}
		n = 1
		if old != nil {
			if n, err = strconv.Atoi(string(old)); err != nil {
				return err
			}
			n++
		}
		return tx.Put(ctx, []byte("n"), []byte(fmt.Sprint(n)))
	})
	if err != nil {
		return err
	}
	missing := "present"
	if _, err := sv.Delete(ctx, []byte("missing")); errors.Is(err, cowkv.ErrNotFound) {
		missing = "not-found"
	}
	fmt.Printf("quickstart: user/1=%s users=%d n=%d missing=%s\n", v, users, n, missing)
	return nil
}

func main() {
	if err := run(context.Background(), os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}
