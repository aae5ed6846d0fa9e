package cowkv

// File watch: the changes of a subvolume's file tree at a path prefix and
// below, in revision order, like inotify (docs/api.md "File watchers").
//
//	w, err := sv.WatchFiles(ctx, "logs/")
//	if err != nil { ... }          // a refused create
//	defer w.Close()
//	for ev, err := range w.Events() {
//		if err != nil { ... }      // ErrCompacted (the tree changed while unwatched), ...
//		fmt.Println(ev.Type, ev.Path, ev.NewPath, ev.Revision)
//	}
//
// A file watcher shares the DB's watch streams, queue bound and ends with
// the KV watchers (watch.go): ctx governs it, Close ends it.

import (
	"context"
	"errors"
	"io"
	"iter"

	"cowkv.dev/cowkv/internal/pb"
)

// FileEventType is what happened in the file tree.
type FileEventType int

// The file event types (FileWatchEvent.Type).
const (
	FileCreate   FileEventType = FileEventType(pb.FileWatchEvent_CREATE)
	FileMkdir    FileEventType = FileEventType(pb.FileWatchEvent_MKDIR)
	FileSymlink  FileEventType = FileEventType(pb.FileWatchEvent_SYMLINK)
	FileLink     FileEventType = FileEventType(pb.FileWatchEvent_LINK)
	FileUnlink   FileEventType = FileEventType(pb.FileWatchEvent_UNLINK)
	FileRmdir    FileEventType = FileEventType(pb.FileWatchEvent_RMDIR)
	FileRename   FileEventType = FileEventType(pb.FileWatchEvent_RENAME)
	FileExchange FileEventType = FileEventType(pb.FileWatchEvent_EXCHANGE)
	FileModify   FileEventType = FileEventType(pb.FileWatchEvent_MODIFY) // write, truncate, fallocate, clone
	FileAttrib   FileEventType = FileEventType(pb.FileWatchEvent_ATTRIB) // setattr
	FileXattr    FileEventType = FileEventType(pb.FileWatchEvent_XATTR)
)

// String is the type's proto name: "CREATE", "RENAME", ...
func (t FileEventType) String() string { return pb.FileWatchEvent_Type(t).String() }

// FileEvent is one change of the file tree. Path is relative to the
// subvolume root (no leading "/"); NewPath is the other path of a rename
// or exchange ("" otherwise). A data or attribute change names one of the
// inode's names. PathsLost: the paths were too long to record (both
// empty): rescan.
type FileEvent struct {
	Type          FileEventType
	Revision, Ino uint64
	Path, NewPath string
	PathsLost     bool
}

func fileEventFrom(f *pb.FileWatchEvent) Event {
	return Event{file: &FileEvent{Type: FileEventType(f.GetType()), Revision: f.GetRevision(),
		Ino: f.GetIno(), Path: f.GetPath(), NewPath: f.GetNewPath(), PathsLost: f.GetPathsLost()}}
}

// FileWatcher is one file watcher (Subvolume.WatchFiles). Read it with
// Events or Next from one goroutine; Close from any.
type FileWatcher struct {
	w *Watcher
}

// WatchFiles creates a file watcher on prefix ("" or "/": every path; a
// rename or exchange is shown when either path is under it) and returns
// once the server created it, so every change made after it returns is
// seen. Of the WatchOptions, WatchFromRevision (replays recorded events;
// ErrCompacted when the start is before what was recorded) and
// WatchProgressNotify apply; the others are refused (ErrInvalidArgument).
// A read-only snapshot is ErrFailedPrecondition. ctx governs the watcher.
func (s *Subvolume) WatchFiles(ctx context.Context, prefix string, opts ...WatchOption) (*FileWatcher, error) {
	var o watchOptions
	for _, f := range opts {
		f(&o)
	}
	if err := checkSubvolume("WatchFiles", s.name); err != nil {
		return nil, err
	}
	if o.prefix || len(o.end) > 0 || o.prevKV || o.noPut || o.noDelete {
		return nil, invalid("WatchFiles", "only WatchFromRevision and WatchProgressNotify apply to a file watcher")
	}
	if len(prefix) > MaxPathBytes {
		return nil, invalid("WatchFiles", "prefix: %d bytes > %d", len(prefix), MaxPathBytes)
	}
	create := &pb.WatchCreateRequest{Subvolume: s.name, StartRevision: o.start, ProgressNotify: o.progress,
		Files: &pb.FileWatchCreate{Prefix: prefix}}
	w, err := s.startWatch(ctx, create)
	if err != nil {
		return nil, err
	}
	return &FileWatcher{w: w}, nil
}

// Next waits (under ctx, which bounds only this wait) for the next event:
// io.EOF once the watcher ended cleanly, else the error that ended it.
func (f *FileWatcher) Next(ctx context.Context) (FileEvent, error) {
	for {
		ev, err := f.w.next(ctx)
		if err != nil {
			return FileEvent{}, err
		}
		if ev.file != nil {
			return *ev.file, nil
		}
	}
}

// Events iterates the events until the watcher ends: a clean end stops the
// iteration, any other end is yielded as the last error.
func (f *FileWatcher) Events() iter.Seq2[FileEvent, error] {
	return func(yield func(FileEvent, error) bool) {
		for {
			ev, err := f.Next(context.Background())
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// ID is the watcher's id on its stream.
func (f *FileWatcher) ID() int64 { return f.w.ID }

// Revision is the latest store revision the server reported to the watcher.
func (f *FileWatcher) Revision() uint64 { return f.w.Revision() }

// Close ends the watcher; events not yet read are dropped. Idempotent.
func (f *FileWatcher) Close() { f.w.Close() }
