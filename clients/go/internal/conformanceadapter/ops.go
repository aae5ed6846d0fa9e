package main

// The op table: one client call per op, results in the canonical shapes of
// ../../../conformance/README.md (bytes as base64).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"cowkv.dev/cowkv"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

type args map[string]any

func (a args) str(k string) string { s, _ := a[k].(string); return s }

// bytes: a bytes argument, base64 on the wire (an absent one is nil).
func (a args) bytes(k string) []byte {
	s, _ := a[k].(string)
	if s == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		fail("argument %s is not base64: %v", k, err)
	}
	return b
}
func (a args) num(k string) uint64 { n, _ := toInt(a[k]); return uint64(n) }
func (a args) flag(k string) bool  { b, _ := a[k].(bool); return b }

// int is a signed argument (lease ids and TTLs may be negative in bad input).
func (a args) int(k string) int64 { n, _ := toInt(a[k]); return n }

// attrChange: set_attr's arguments; an absent one is kept, "now" = the server's clock.
func (a args) attrChange() cowkv.AttrChange {
	var c cowkv.AttrChange
	u32 := func(k string) *uint32 {
		if a[k] == nil {
			return nil
		}
		v := uint32(a.num(k))
		return &v
	}
	c.Mode, c.UID, c.GID = u32("mode"), u32("uid"), u32("gid")
	if a["size"] != nil {
		v := a.num("size")
		c.Size = &v
	}
	times := []struct {
		k   string
		now *bool
		t   **time.Time
	}{{"atime_ns", &c.AtimeNow, &c.Atime}, {"mtime_ns", &c.MtimeNow, &c.Mtime}}
	for _, x := range times {
		switch v := a[x.k]; {
		case v == "now":
			*x.now = true
		case v != nil:
			t := time.Unix(0, a.int(x.k))
			*x.t = &t
		}
	}
	return c
}

func (a args) lease() cowkv.WriteOption { return cowkv.WithLease(cowkv.LeaseID(a.int("lease"))) }

func (a args) durability() cowkv.WriteOption {
	switch a.str("durability") {
	case "durable":
		return cowkv.WithDurability(cowkv.DurabilityDurable)
	case "async":
		return cowkv.WithDurability(cowkv.DurabilityAsync)
	}
	return cowkv.WithDurability(cowkv.DurabilityDefault)
}

func (a args) keyRange() cowkv.KeyRange {
	return cowkv.KeyRange{Start: a.bytes("start"), End: a.bytes("end"), Prefix: a.bytes("prefix")}
}

func (a args) rangeOpts() []cowkv.RangeOption {
	var o []cowkv.RangeOption
	if a.flag("reverse") {
		o = append(o, cowkv.Reverse())
	}
	if a.flag("keys_only") {
		o = append(o, cowkv.KeysOnly())
	}
	if a.flag("count_only") {
		o = append(o, cowkv.CountOnly())
	}
	if n := a.num("page_size"); n > 0 {
		o = append(o, cowkv.PageSize(n))
	}
	if n := a.num("limit"); n > 0 {
		o = append(o, cowkv.Limit(n))
	}
	if n := a.num("revision"); n > 0 {
		o = append(o, cowkv.RangeAtRevision(n))
	}
	if s := a.str("snapshot"); s != "" {
		o = append(o, cowkv.AtSnapshot(s))
	}
	if t := a.bytes("page_token"); len(t) > 0 {
		o = append(o, cowkv.PageToken(t))
	}
	return o
}

func info(i cowkv.SubvolumeInfo) map[string]any {
	return map[string]any{"id": i.ID, "name": i.Name, "parent_id": i.ParentID, "read_only": i.ReadOnly}
}

func kvMap(kv cowkv.KeyValue, rev uint64) map[string]any {
	return map[string]any{"key": b64(kv.Key), "value": b64(kv.Value), "create_revision": kv.CreateRevision,
		"mod_revision": kv.ModRevision, "version": kv.Version, "revision": rev}
}

func kvLists(kvs []cowkv.KeyValue) map[string]any {
	keys, values := []any{}, []any{}
	for _, kv := range kvs {
		keys, values = append(keys, b64(kv.Key)), append(values, b64(kv.Value))
	}
	return map[string]any{"keys": keys, "values": values}
}

func pageMap(p cowkv.Page) map[string]any {
	m := kvLists(p.KVs)
	m["count"], m["more"], m["next_page_token"] = p.Count, p.More, b64(p.NextPageToken)
	return m
}

func stat(s cowkv.FileStat) map[string]any {
	return map[string]any{"ino": s.Ino, "kind": s.Kind.String(), "mode": s.Mode, "nlink": s.Nlink, "size": s.Size,
		"uid": s.UID, "gid": s.GID, "atime_ns": s.Atime.UnixNano(), "mtime_ns": s.Mtime.UnixNano(),
		"ctime_ns": s.Ctime.UnixNano()}
}

var empty = map[string]any{}

func compare(c map[string]any) cowkv.Cmp {
	a := args(c)
	key := a.bytes("key")
	op := a.str("op")
	if a.str("target") == "exists" {
		if a.flag("exists") == (op == "=") {
			return cowkv.Exists(key)
		}
		return cowkv.Missing(key)
	}
	if a.str("target") == "value" {
		t, v := cowkv.Value(key), a.bytes("value")
		return map[string]func([]byte) cowkv.Cmp{"=": t.Equal, "!=": t.NotEqual, "<": t.Less, ">": t.Greater}[op](v)
	}
	t := map[string]func([]byte) cowkv.NumberTarget{"version": cowkv.Version,
		"create_revision": cowkv.CreateRevision, "mod_revision": cowkv.ModRevision}[a.str("target")](key)
	return map[string]func(uint64) cowkv.Cmp{"=": t.Equal, "!=": t.NotEqual, "<": t.Less, ">": t.Greater}[op](a.num("number"))
}

func txnOps(list any) []cowkv.Op {
	var ops []cowkv.Op
	l, _ := list.([]any)
	for _, o := range l {
		for kind, body := range o.(map[string]any) {
			a := args(body.(map[string]any))
			switch kind {
			case "put":
				ops = append(ops, cowkv.OpPut(a.bytes("key"), a.bytes("value"), a.lease()))
			case "delete":
				ops = append(ops, cowkv.OpDelete(a.bytes("key")))
			case "delete_range":
				ops = append(ops, cowkv.OpDeleteRange(a.bytes("start"), a.bytes("end")))
			case "range":
				ops = append(ops, cowkv.OpRange(a.keyRange(), a.rangeOpts()...))
			}
		}
	}
	return ops
}

func (r *adapter) tx(a args) *cowkv.Tx {
	tx, ok := r.txs[a.str("tx")]
	if !ok {
		fail("no transaction named %q", a.str("tx"))
	}
	return tx
}

// linksPerDir: link_many's names per directory. All names of one inode in one
// directory share one inode-ref item, which must fit in a node.
const linksPerDir = 400

func (r *adapter) exec(op string, a args) (any, error) {
	ctx, db := r.ctx, r.db
	sv := db.Subvolume(a.str("sv"))
	switch op {
	case "create_subvolume":
		i, err := db.CreateSubvolume(ctx, a.str("name"))
		return info(i), err
	case "show_subvolume":
		i, err := db.ShowSubvolume(ctx, a.str("name"))
		return info(i), err
	case "list_subvolumes":
		var o []cowkv.ListOption
		if a.flag("read_only") {
			o = append(o, cowkv.OnlyReadOnly())
		}
		if a.flag("snapshots_only") {
			o = append(o, cowkv.OnlySnapshots())
		}
		if l, ok := a["sort"].([]any); ok {
			for _, k := range l {
				o = append(o, cowkv.SortBy(fmt.Sprint(k)))
			}
		}
		l, err := db.ListSubvolumes(ctx, o...)
		names := []any{}
		for _, i := range l {
			names = append(names, i.Name)
		}
		return map[string]any{"names": names}, err
	case "sync_subvolumes":
		var ids []uint64
		if l, ok := a["ids"].([]any); ok {
			for _, v := range l {
				n, _ := toInt(v)
				ids = append(ids, uint64(n))
			}
		}
		synced, err := db.SyncSubvolumes(ctx, ids...)
		out := []any{}
		for _, id := range synced {
			out = append(out, id)
		}
		return map[string]any{"synced": out}, err
	case "snapshot":
		i, err := db.Snapshot(ctx, a.str("source"), a.str("name"), a.flag("read_only"))
		return info(i), err
	case "rename_subvolume":
		return empty, db.RenameSubvolume(ctx, a.str("name"), a.str("new_name"))
	case "delete_subvolume":
		return empty, db.DeleteSubvolume(ctx, a.str("name"))

	case "get":
		kv, rev, err := sv.GetKV(ctx, a.bytes("key"), cowkv.AtRevision(a.num("revision")))
		return kvMap(kv, rev), err
	case "put":
		rev, err := sv.Put(ctx, a.bytes("key"), a.bytes("value"), a.durability(), a.lease())
		return map[string]any{"revision": rev}, err
	case "delete":
		rev, err := sv.Delete(ctx, a.bytes("key"), a.durability())
		return map[string]any{"revision": rev}, err
	case "delete_range":
		n, rev, err := sv.DeleteRange(ctx, a.keyRange(), a.durability())
		return map[string]any{"deleted": n, "revision": rev}, err
	case "range":
		var kvs []cowkv.KeyValue
		for kv, err := range sv.Range(ctx, a.keyRange(), a.rangeOpts()...) {
			if err != nil {
				return nil, err
			}
			kvs = append(kvs, kv)
		}
		return kvLists(kvs), nil
	case "range_page":
		p, err := sv.RangePage(ctx, a.keyRange(), a.rangeOpts()...)
		return pageMap(p), err
	case "put_many":
		rounds := max(a.num("rounds"), 1)
		for round := uint64(0); round < rounds; round++ {
			for i := uint64(0); i < a.num("count"); i += 1000 {
				var ops []cowkv.Op
				for j := i; j < min(i+1000, a.num("count")); j++ {
					ops = append(ops, cowkv.OpPut([]byte(fmt.Sprintf("%s%06d", a.str("prefix"), j)), a.bytes("value")))
				}
				if _, err := sv.If().Then(ops...).Commit(ctx, a.durability()); err != nil {
					return nil, err
				}
			}
		}
		return empty, nil
	case "txn":
		var cmps []cowkv.Cmp
		l, _ := a["compare"].([]any)
		for _, c := range l {
			cmps = append(cmps, compare(c.(map[string]any)))
		}
		res, err := sv.If(cmps...).Then(txnOps(a["success"])...).Else(txnOps(a["failure"])...).Commit(ctx, a.durability())
		responses := []any{}
		for _, o := range res.Results {
			switch o.Kind {
			case "put":
				responses = append(responses, map[string]any{"put": empty})
			case "delete":
				responses = append(responses, map[string]any{"delete": map[string]any{"deleted": o.Deleted}})
			case "range":
				responses = append(responses, map[string]any{"range": pageMap(o.Range)})
			}
		}
		return map[string]any{"succeeded": res.Succeeded, "revision": res.Revision, "responses": responses}, err

	case "begin":
		tx, err := sv.Begin(ctx, cowkv.Lease(time.Duration(a.num("lease_ms"))*time.Millisecond))
		if err != nil {
			return nil, err
		}
		if name := a.str("as"); name != "" {
			r.txs[name] = tx
		}
		return map[string]any{"read_revision": tx.ReadRevision(), "lease_ms": uint64(tx.Lease().Milliseconds())}, nil
	case "tx_get":
		tx := r.tx(a)
		kv, err := tx.GetKV(ctx, a.bytes("key"))
		return kvMap(kv, tx.ReadRevision()), err
	case "tx_range":
		var kvs []cowkv.KeyValue
		for kv, err := range r.tx(a).Range(ctx, a.keyRange(), a.rangeOpts()...) {
			if err != nil {
				return nil, err
			}
			kvs = append(kvs, kv)
		}
		return kvLists(kvs), nil
	case "tx_put":
		return empty, r.tx(a).Put(ctx, a.bytes("key"), a.bytes("value"))
	case "tx_delete":
		return empty, r.tx(a).Delete(ctx, a.bytes("key"))
	case "tx_delete_range":
		return empty, r.tx(a).DeleteRange(ctx, a.bytes("start"), a.bytes("end"))
	case "commit":
		rev, err := r.tx(a).Commit(ctx, a.durability())
		return map[string]any{"revision": rev}, err
	case "abort":
		return empty, r.tx(a).Abort(ctx)
	case "retry_txn_conflict_once":
		attempts, key := 0, a.bytes("key")
		err := sv.RunInTransaction(ctx, func(tx *cowkv.Tx) error {
			attempts++
			n := 0
			v, err := tx.Get(ctx, key)
			if err == nil {
				n, _ = strconv.Atoi(string(v))
			} else if !errors.Is(err, cowkv.ErrNotFound) {
				return err
			}
			if attempts == 1 {
				if _, err := sv.Put(ctx, key, a.bytes("interfere")); err != nil {
					return err
				}
			}
			return tx.Put(ctx, key, []byte(strconv.Itoa(n+1)))
		}, cowkv.Backoff(time.Millisecond, 20*time.Millisecond))
		return map[string]any{"attempts": attempts}, err

	case "stat":
		s, err := sv.Stat(ctx, a.str("path"))
		return stat(s), err
	case "mkdir":
		s, err := sv.Mkdir(ctx, a.str("path"), uint32(a.num("mode")))
		return stat(s), err
	case "create_file":
		s, err := sv.CreateFile(ctx, a.str("path"), uint32(a.num("mode")))
		return stat(s), err
	case "write_file":
		o := []cowkv.FileWriteOption{cowkv.At(a.num("offset"))}
		if a.flag("create") {
			o = append(o, cowkv.Create(uint32(a.num("mode"))))
		}
		if a.flag("truncate") {
			o = append(o, cowkv.Truncate())
		}
		n, s, err := sv.WriteFile(ctx, a.str("path"), a.bytes("data"), o...)
		return map[string]any{"bytes_written": n, "size": s.Size}, err
	case "read_file":
		d, err := sv.ReadAt(ctx, a.str("path"), a.num("offset"), a.num("length"))
		return map[string]any{"data": b64(d), "size": len(d)}, err
	case "readdir":
		l, err := sv.ReadDir(ctx, a.str("path"), cowkv.PageSize(a.num("page_size")))
		names := []any{}
		for _, e := range l {
			names = append(names, e.Name)
		}
		return map[string]any{"names": names}, err
	case "rename":
		var flags cowkv.RenameFlags
		l, _ := a["flags"].([]any)
		for _, f := range l {
			flags |= map[any]cowkv.RenameFlags{"noreplace": cowkv.RenameNoReplace, "exchange": cowkv.RenameExchange}[f]
		}
		return empty, sv.Rename(ctx, a.str("from"), a.str("to"), flags)
	case "link":
		s, err := sv.Link(ctx, a.str("existing"), a.str("new_path"))
		return stat(s), err
	case "symlink":
		s, err := sv.Symlink(ctx, a.str("target"), a.str("path"))
		return stat(s), err
	case "readlink":
		t, err := sv.ReadLink(ctx, a.str("path"))
		return map[string]any{"target": t}, err
	case "unlink":
		return empty, sv.Unlink(ctx, a.str("path"))
	case "rmdir":
		return empty, sv.Rmdir(ctx, a.str("path"))
	case "truncate":
		s, err := sv.SetSize(ctx, a.str("path"), a.num("size"))
		return stat(s), err
	case "fsync":
		if a["offset"] != nil || a["length"] != nil {
			return empty, sv.FsyncRange(ctx, a.str("path"), a.flag("datasync"), a.num("offset"), a.num("length"))
		}
		return empty, sv.Fsync(ctx, a.str("path"), a.flag("datasync"))
	case "open_handle", "create_tmpfile":
		var h *cowkv.FileHandle
		var err error
		if op == "open_handle" {
			h, err = sv.Open(ctx, a.str("path"), time.Duration(a.num("lease_ms"))*time.Millisecond)
		} else {
			h, err = sv.CreateTmpfile(ctx, a.str("dir"), uint32(a.num("mode")), 0)
		}
		if err != nil {
			return nil, err
		}
		r.handles[a.str("as")] = h
		return map[string]any{"ino": h.Ino, "lease_ms": h.Lease.Milliseconds(), "stat": stat(h.Opened)}, nil
	case "handle_stat":
		s, err := r.handles[a.str("h")].Stat(ctx)
		return stat(s), err
	case "handle_read":
		d, err := r.handles[a.str("h")].ReadAt(ctx, a.num("offset"), a.num("length"))
		return map[string]any{"data": b64(d), "size": len(d)}, err
	case "handle_write":
		n, err := r.handles[a.str("h")].WriteAt(ctx, a.bytes("data"), a.num("offset"))
		return map[string]any{"bytes_written": n}, err
	case "handle_link":
		s, err := r.handles[a.str("h")].Link(ctx, a.str("new_path"))
		return stat(s), err
	case "close_handle":
		h := r.handles[a.str("h")]
		delete(r.handles, a.str("h"))
		return empty, h.Close(ctx)
	case "fallocate":
		var mode cowkv.FallocateMode
		l, _ := a["mode"].([]any)
		for _, m := range l {
			switch m {
			case "keep_size":
				mode |= cowkv.FallocKeepSize
			case "punch_hole":
				mode |= cowkv.FallocPunchHole | cowkv.FallocKeepSize
			case "zero_range":
				mode |= cowkv.FallocZeroRange
			}
		}
		s, err := sv.Fallocate(ctx, a.str("path"), a.num("offset"), a.num("length"), mode)
		return stat(s), err
	case "set_attr":
		s, err := sv.SetAttr(ctx, a.str("path"), a.attrChange())
		return stat(s), err
	case "set_xattr":
		flags := map[any]cowkv.XattrFlags{"create": cowkv.XattrCreate, "replace": cowkv.XattrReplace}[a["flags"]]
		return empty, sv.SetXattr(ctx, a.str("path"), a.str("name"), a.bytes("value"), flags)
	case "get_xattr":
		v, err := sv.GetXattr(ctx, a.str("path"), a.str("name"))
		return map[string]any{"value": b64(v)}, err
	case "list_xattrs":
		names, err := sv.ListXattrs(ctx, a.str("path"))
		l := []any{}
		for _, n := range names {
			l = append(l, n)
		}
		return map[string]any{"names": l}, err
	case "remove_xattr":
		return empty, sv.RemoveXattr(ctx, a.str("path"), a.str("name"))
	case "link_many":
		for i := uint64(0); i < a.num("count"); i++ {
			dir := fmt.Sprintf("%s%04d", a.str("prefix"), i/linksPerDir)
			if i%linksPerDir == 0 {
				if _, err := sv.Mkdir(ctx, dir, 0); err != nil {
					return nil, err
				}
			}
			if _, err := sv.Link(ctx, a.str("existing"), fmt.Sprintf("%s/%06d", dir, i)); err != nil {
				return nil, err
			}
		}
		return empty, nil
	case "clone":
		return empty, sv.Clone(ctx, cowkv.CloneRange{Src: a.str("src_path"), SrcOffset: a.num("src_offset"),
			Dst: a.str("dst_path"), DstOffset: a.num("dst_offset"), Length: a.num("length")})
	case "fiemap":
		l, err := sv.Fiemap(ctx, a.str("path"), a.num("offset"), a.num("length"))
		extents := []any{}
		for _, e := range l {
			flags := []any{}
			for _, f := range []struct {
				bit  cowkv.ExtentFlags
				name string
			}{{cowkv.ExtentLast, "LAST"}, {cowkv.ExtentNotAligned, "NOT_ALIGNED"}, {cowkv.ExtentInline, "INLINE"}, {cowkv.ExtentShared, "SHARED"}} {
				if e.Flags&f.bit != 0 {
					flags = append(flags, f.name)
				}
			}
			extents = append(extents, map[string]any{"logical": e.Logical, "physical": e.Physical, "length": e.Length, "flags": flags})
		}
		return map[string]any{"extents": extents}, err

	case "lease_grant", "lease_revoke", "lease_keep_alive_once", "lease_time_to_live", "lease_list":
		return r.execLease(op, sv.Leases(), a)
	case "compact", "watch", "file_watch", "watch_next", "watch_cancel":
		return r.execWatch(op, sv, a)
	case "send", "receive", "partial_receives", "abort_receive", "digest":
		return r.execSend(op, db, a)

	case "sync":
		g, err := db.Sync(ctx)
		return map[string]any{"generation": g}, err
	case "check":
		c, err := db.Check(ctx)
		return map[string]any{"ok": c.OK}, err

	}
	fail("unknown op %q", op)
	return nil, nil
}

// execSend runs send and receive; a send stream is held whole (scenarios
// keep it small).
func (r *adapter) execSend(op string, db *cowkv.DB, a args) (any, error) {
	ctx := r.ctx
	switch op {
	case "send":
		var buf bytes.Buffer
		st, err := db.SendTo(ctx, &buf, a.str("snapshot"), cowkv.SendParent(a.str("parent")), cowkv.SendResumeToken(a.str("resume_token")))
		return map[string]any{"stream": b64(buf.Bytes()), "records": st.Records, "bytes": st.Bytes}, err
	case "receive":
		data := a.bytes("stream")
		if n := a.num("cut_after_bytes"); n > 0 && n < uint64(len(data)) {
			data = data[:n] // the upload ends early
		}
		o := []cowkv.ReceiveOption{cowkv.ReceiveName(a.str("name"))}
		if a.flag("resumable") {
			o = append(o, cowkv.ReceiveResumable())
		}
		if a.flag("dry_run") {
			o = append(o, cowkv.ReceiveDryRun())
		}
		res, err := db.Receive(ctx, bytes.NewReader(data), o...)
		return map[string]any{"name": res.Name, "incremental": res.Incremental, "parent": res.Parent, "records": res.Records}, err
	case "partial_receives":
		l, err := db.PartialReceives(ctx)
		out := []any{}
		for _, p := range l {
			out = append(out, map[string]any{"name": p.Name, "token": p.Token, "records": p.Records})
		}
		return map[string]any{"partials": out}, err
	case "abort_receive":
		return empty, db.AbortReceive(ctx, a.str("name"))
	}
	d, err := db.Digest(ctx, a.str("subvolume"))
	return map[string]any{"digest": d}, err
}

// execLease runs the lease ops; lease ids are int64 in results.
func (r *adapter) execLease(op string, l *cowkv.Leases, a args) (any, error) {
	ctx, id := r.ctx, cowkv.LeaseID(a.int("id"))
	switch op {
	case "lease_grant":
		g, err := l.Grant(ctx, a.int("ttl"), id)
		return map[string]any{"id": int64(g.ID), "ttl": g.TTL}, err
	case "lease_revoke":
		rev, err := l.Revoke(ctx, id)
		return map[string]any{"revision": rev}, err
	case "lease_keep_alive_once":
		ttl, err := l.KeepAliveOnce(ctx, id)
		return map[string]any{"ttl": ttl}, err
	case "lease_time_to_live":
		i, err := l.TimeToLive(ctx, id, a.flag("keys"))
		keys := []any{}
		for _, k := range i.Keys {
			keys = append(keys, b64(k))
		}
		return map[string]any{"id": int64(i.ID), "ttl": i.TTL, "granted_ttl": i.GrantedTTL, "keys": keys}, err
	}
	ids, err := l.List(ctx)
	out := []any{}
	for _, id := range ids {
		out = append(out, int64(id))
	}
	return map[string]any{"ids": out}, err
}

// execWatch runs the watch ops; watchers are kept by their "as" name.
func (r *adapter) execWatch(op string, sv *cowkv.Subvolume, a args) (any, error) {
	switch op {
	case "compact":
		c, err := sv.Compact(r.ctx, a.num("revision"))
		return map[string]any{"compact_revision": c}, err
	case "watch":
		var o []cowkv.WatchOption
		if a.flag("prefix") {
			o = append(o, cowkv.WatchPrefix())
		}
		if end := a.bytes("end"); len(end) > 0 {
			o = append(o, cowkv.WatchRange(end))
		}
		o = append(o, cowkv.WatchFromRevision(a.num("start_revision")))
		if a.flag("prev_kv") {
			o = append(o, cowkv.WatchPrevKV())
		}
		fs, _ := a["filters"].([]any)
		for _, f := range fs {
			switch f {
			case "noput":
				o = append(o, cowkv.WatchNoPut())
			case "nodelete":
				o = append(o, cowkv.WatchNoDelete())
			}
		}
		w, err := sv.Watch(r.ctx, a.bytes("key"), o...)
		if err != nil {
			return nil, err
		}
		if name := a.str("as"); name != "" {
			r.watches[name] = kvWatch{w}
		} else {
			w.Close()
		}
		return empty, nil
	case "file_watch":
		w, err := sv.WatchFiles(r.ctx, a.str("prefix"), cowkv.WatchFromRevision(a.num("start_revision")))
		if err != nil {
			return nil, err
		}
		if name := a.str("as"); name != "" {
			r.watches[name] = fileWatch{w}
		} else {
			w.Close()
		}
		return empty, nil
	case "watch_next":
		w := r.watches[a.str("w")]
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		defer cancel()
		events := []any{}
		for range a.num("count") {
			ev, err := w.nextMap(ctx)
			if err != nil {
				return nil, err
			}
			events = append(events, ev)
		}
		return map[string]any{"events": events}, nil
	}
	w := r.watches[a.str("w")]
	delete(r.watches, a.str("w"))
	w.Close()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	events := []any{}
	for {
		ev, err := w.nextMap(ctx)
		if errors.Is(err, io.EOF) {
			return map[string]any{"events": events}, nil
		}
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
}

// watchHandle is a KV or a file watcher, as watch_next and watch_cancel read them.
type watchHandle interface {
	nextMap(ctx context.Context) (any, error)
	Close()
}

type kvWatch struct{ *cowkv.Watcher }

func (w kvWatch) nextMap(ctx context.Context) (any, error) {
	ev, err := w.Next(ctx)
	if err != nil {
		return nil, err
	}
	return eventMap(ev), nil
}

type fileWatch struct{ *cowkv.FileWatcher }

// nextMap: a file event's canonical shape (conformance/README.md "file_watch").
func (w fileWatch) nextMap(ctx context.Context) (any, error) {
	ev, err := w.Next(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"type": strings.ToLower(ev.Type.String()), "path": ev.Path, "new_path": ev.NewPath,
		"revision": ev.Revision, "ino": ev.Ino, "paths_lost": ev.PathsLost}, nil
}

func eventMap(ev cowkv.Event) map[string]any {
	m := map[string]any{"type": "put", "key": b64(ev.KV.Key), "value": b64(ev.KV.Value),
		"create_revision": ev.KV.CreateRevision, "mod_revision": ev.KV.ModRevision,
		"version": ev.KV.Version, "has_prev": ev.PrevKV != nil, "prev_value": "", "prev_mod_revision": uint64(0)}
	if ev.Type == cowkv.EventDelete {
		m["type"] = "delete"
	}
	if ev.PrevKV != nil {
		m["prev_value"], m["prev_mod_revision"] = b64(ev.PrevKV.Value), ev.PrevKV.ModRevision
	}
	return m
}

// toInt: a JSON number (decoded with UseNumber) as int64.
func toInt(v any) (int64, bool) {
	if x, ok := v.(json.Number); ok {
		n, err := x.Int64()
		return n, err == nil
	}
	return 0, false
}
