// Command conformanceadapter is the Go client's conformance adapter: it
// executes one JSON op per line from stdin through the client's public API
// and answers on stdout (clients/conformance/README.md, "Adapter protocol").
// The driver, clients/conformance/driver.py, owns servers, variables and
// matching; conformance_test.go builds this command and runs the driver with it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"cowkv.dev/cowkv"
)

// adapter is one client and the named handles of the current scenario.
type adapter struct {
	ctx     context.Context
	db      *cowkv.DB
	txs     map[string]*cowkv.Tx
	handles map[string]*cowkv.FileHandle
	watches map[string]watchHandle
}

type request struct {
	ID   json.Number `json:"id"`
	Op   string      `json:"op"`
	Args args        `json:"args"`
}

// failure is a panic value: the adapter could not carry out the op (an
// unknown op or handle name), which fails the step whatever it expects.
type failure string

func fail(format string, v ...any) { panic(failure(fmt.Sprintf(format, v...))) }

func newAdapter() *adapter {
	r := &adapter{ctx: context.Background()}
	r.reset()
	return r
}

// reset ends a scenario: watchers cancelled, handles forgotten, client closed.
func (r *adapter) reset() {
	for _, w := range r.watches {
		w.Close()
	}
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
	r.txs = map[string]*cowkv.Tx{}
	r.handles = map[string]*cowkv.FileHandle{}
	r.watches = map[string]watchHandle{}
}

// connect replaces the client with a new one (a new connection), lazily.
func (r *adapter) connect(a args) (any, error) {
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
	var o []cowkv.Option
	if t := a.str("token"); t != "" {
		o = append(o, cowkv.WithToken(t))
	}
	if ms := a.num("deadline_ms"); ms > 0 {
		o = append(o, cowkv.WithDefaultTimeout(time.Duration(ms)*time.Millisecond))
	}
	db, err := cowkv.Dial(r.ctx, a.str("address"), o...)
	if err != nil {
		return nil, err
	}
	r.db = db
	return empty, nil
}

// handle runs one request; a panic (failure or adapter bug) becomes "fail".
func (r *adapter) handle(req request) (answer map[string]any) {
	answer = map[string]any{"id": req.ID}
	defer func() {
		if p := recover(); p != nil {
			delete(answer, "result")
			answer["fail"] = fmt.Sprint(p)
		}
	}()
	if req.Args == nil {
		req.Args = args{}
	}
	var res any
	var err error
	switch req.Op {
	case "connect":
		res, err = r.connect(req.Args)
	case "reset":
		r.reset()
		res = empty
	default:
		if r.db == nil {
			fail("no client: connect first")
		}
		res, err = r.exec(req.Op, req.Args)
	}
	if err != nil {
		answer["error"] = errorAnswer(err)
	} else {
		answer["result"] = res
	}
	return answer
}

// errorAnswer: the most specific class, its parents, errno, compact revision.
func errorAnswer(err error) map[string]any {
	is := []string{}
	for _, p := range []struct {
		kind error
		name string
	}{{cowkv.ErrFailedPrecondition, "failed_precondition"},
		{cowkv.ErrResourceExhausted, "resource_exhausted"}, {cowkv.ErrTooOld, "too_old"}} {
		if errors.Is(err, p.kind) {
			is = append(is, p.name)
		}
	}
	e := map[string]any{"class": cowkv.ErrorClass(err), "is": is, "message": err.Error()}
	var ce *cowkv.Error
	if errors.As(err, &ce) {
		if ce.Errno != "" {
			e["errno"] = ce.Errno
		}
		if errors.Is(err, cowkv.ErrCompacted) {
			e["compact_revision"] = ce.CompactRevision
		}
	}
	return e
}

func main() {
	r := newAdapter()
	in := bufio.NewReader(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			break
		}
		var req request
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber() // lease ids are int64: keep all 64 bits
		if err := dec.Decode(&req); err != nil {
			fmt.Fprintf(os.Stderr, "conformanceadapter: bad request %q: %v\n", line, err)
			os.Exit(2)
		}
		if err := out.Encode(r.handle(req)); err != nil {
			fmt.Fprintf(os.Stderr, "conformanceadapter: %v\n", err)
			os.Exit(2)
		}
	}
	r.reset()
}
