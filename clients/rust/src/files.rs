//! A subvolume's file tree (service Files).
//!
//! Paths are '/'-separated from the subvolume root ("a/b" = "/a/b");
//! symlinks are stored, never followed. File errors carry the POSIX name:
//! `err.errno_name() == Some("ENOTEMPTY")`.

use bytes::Bytes;

use crate::error::Result;
use crate::pb;
use crate::rpc::Rpc;
use crate::validate;

/// renameat2 RENAME_NOREPLACE: fail with AlreadyExists if the target exists.
pub const RENAME_NOREPLACE: u32 = 1;
/// renameat2 RENAME_EXCHANGE: swap the two names, which must both exist.
pub const RENAME_EXCHANGE: u32 = 2;
/// Bytes per Write message (the server takes at most 4 MiB).
pub const WRITE_CHUNK: usize = 1 << 20;

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Directory,
    Symlink,
}

impl FileKind {
    fn from_proto(k: i32) -> FileKind {
        match pb::FileKind::try_from(k) {
            Ok(pb::FileKind::Directory) => FileKind::Directory,
            Ok(pb::FileKind::Symlink) => FileKind::Symlink,
            _ => FileKind::Regular,
        }
    }

    /// "regular", "directory" or "symlink".
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Regular => "regular",
            FileKind::Directory => "directory",
            FileKind::Symlink => "symlink",
        }
    }
}

/// Attributes of one inode; times in ns since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// Inode number; the root directory is 256.
    pub ino: u64,
    pub kind: FileKind,
    /// Permission bits (07777).
    pub mode: u32,
    /// Names that refer to it.
    pub nlink: u32,
    pub size: u64,
    /// Bytes of data the file references (holes excluded).
    pub bytes: u64,
    pub uid: u32,
    pub gid: u32,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub btime_ns: i64,
    /// Engine generation that created the inode.
    pub generation: u64,
    /// Engine generation that last changed it.
    pub transid: u64,
}

impl From<pb::FileStat> for FileStat {
    fn from(m: pb::FileStat) -> Self {
        FileStat {
            ino: m.ino,
            kind: FileKind::from_proto(m.kind),
            mode: m.mode,
            nlink: m.nlink,
            size: m.size,
            bytes: m.bytes,
            uid: m.uid,
            gid: m.gid,
            atime_ns: m.atime_ns,
            mtime_ns: m.mtime_ns,
            ctime_ns: m.ctime_ns,
            btime_ns: m.btime_ns,
            generation: m.generation,
            transid: m.transid,
        }
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub ino: u64,
    pub kind: FileKind,
    /// Its position; a listing from cookie + 1 continues after it.
    pub cookie: u64,
}

/// One extent of a file, as Linux's FIEMAP reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// File offset.
    pub logical: u64,
    /// Device byte address (0 for inline data).
    pub physical: u64,
    pub length: u64,
    /// Bit mask of the `Extent::FLAG_*` values (Linux's FIEMAP_EXTENT_*).
    pub flags: u32,
}

impl Extent {
    pub const FLAG_LAST: u32 = 0x1;
    pub const FLAG_NOT_ALIGNED: u32 = 0x100;
    pub const FLAG_INLINE: u32 = 0x200;
    /// Preallocated (fallocate): reads as zeros.
    pub const FLAG_UNWRITTEN: u32 = 0x800;
    pub const FLAG_SHARED: u32 = 0x2000;

    /// Shared with another file or snapshot (reflink, snapshot).
    pub fn shared(&self) -> bool {
        self.flags & Self::FLAG_SHARED != 0
    }
    /// Stored inline in a metadata node.
    pub fn inline(&self) -> bool {
        self.flags & Self::FLAG_INLINE != 0
    }
    /// The file's last extent.
    pub fn last(&self) -> bool {
        self.flags & Self::FLAG_LAST != 0
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteResult {
    pub bytes_written: u64,
    /// The file's attributes afterwards.
    pub stat: FileStat,
}

/// How [`Files::write_with`] writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Where the data goes.
    pub offset: u64,
    /// Create the file (0644, or `mode`) if absent.
    pub create: bool,
    /// Cut the file to `offset` bytes first.
    pub truncate: bool,
    /// Permission bits for `create` (0 = 0644).
    pub mode: u32,
}

/// The file tree of one subvolume. Cheap to clone.
///
/// ```no_run
/// # async fn f(client: cowkv::Client) -> cowkv::Result<()> {
/// let fs = client.subvolume("data")?.files();
/// fs.mkdir("/logs").await?;
/// fs.write("/logs/a.txt", "hello\n").await?;   // create + truncate
/// fs.fsync("/logs/a.txt").await?;
/// fs.create("/logs/b.txt").await?;
/// fs.clone_file("/logs/a.txt", "/logs/b.txt").await?;  // reflink
/// assert!(fs.fiemap("/logs/b.txt").await?[0].shared());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Files {
    rpc: Rpc,
    subvolume: String,
}

impl Files {
    pub(crate) fn new(rpc: Rpc, subvolume: String) -> Files {
        Files { rpc, subvolume }
    }

    pub(crate) fn sv(&self) -> String {
        self.subvolume.clone()
    }

    /// A copy of this handle whose calls have the deadline `d` (the
    /// grpc-timeout the server enforces and the client's timer, which
    /// ends the call with [`crate::Error::DeadlineExceeded`]), unary and
    /// streaming alike, instead of the client's defaults
    /// ([`crate::Options::deadline`], [`crate::Options::stream_deadline`]):
    /// `sv.timeout(Duration::from_millis(200)).get("k").await`. No call is made.
    pub fn timeout(&self, d: std::time::Duration) -> Self {
        let mut c = self.clone();
        c.rpc = c.rpc.with_timeout(d);
        c
    }

    pub(crate) fn rpc(&self) -> &Rpc {
        &self.rpc
    }

    /// Attributes of a file, directory or symlink.
    pub async fn stat(&self, path: &str) -> Result<FileStat> {
        validate::path("stat", "path", path)?;
        self.stat_req(pb::StatRequest { subvolume: self.sv(), path: path.into(), ino: 0, ..Default::default() }).await
    }

    /// Attributes by inode number (stable across renames).
    pub async fn stat_ino(&self, ino: u64) -> Result<FileStat> {
        self.stat_req(pb::StatRequest { subvolume: self.sv(), path: String::new(), ino, ..Default::default() }).await
    }

    async fn stat_req(&self, req: pb::StatRequest) -> Result<FileStat> {
        Ok(self
            .rpc
            .idempotent("stat", self.rpc.deadline, |t| {
                let mut c = self.rpc.files();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.stat(r).await }
            })
            .await?
            .into())
    }

    /// Whether the path names anything.
    pub async fn exists(&self, path: &str) -> Result<bool> {
        match self.stat(path).await {
            Ok(_) => Ok(true),
            Err(crate::Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates a directory (0755); the parent must exist.
    pub async fn mkdir(&self, path: &str) -> Result<FileStat> {
        self.mkdir_mode(path, 0).await
    }

    /// Creates a directory with these permission bits (0 = 0755).
    pub async fn mkdir_mode(&self, path: &str, mode: u32) -> Result<FileStat> {
        validate::path("mkdir", "path", path)?;
        let req = pb::MkdirRequest { subvolume: self.sv(), path: path.into(), mode };
        Ok(Rpc::unary("mkdir", self.rpc.files().mkdir(self.rpc.request(req, None))).await?.into())
    }

    /// Creates a directory and the missing ones above it; an existing directory is fine.
    pub async fn mkdir_all(&self, path: &str) -> Result<FileStat> {
        validate::path("mkdir", "path", path)?;
        let mut p = String::new();
        let mut last = None;
        for part in path.split('/').filter(|s| !s.is_empty()) {
            p.push('/');
            p.push_str(part);
            last = Some(match self.mkdir(&p).await {
                Ok(st) => st,
                Err(e @ crate::Error::AlreadyExists(_)) => {
                    let st = self.stat(&p).await?;
                    if st.kind != FileKind::Directory {
                        return Err(e);
                    }
                    st
                }
                Err(e) => return Err(e),
            });
        }
        match last {
            Some(st) => Ok(st),
            None => self.stat("/").await,
        }
    }

    /// Creates an empty regular file (0644); AlreadyExists if the name is taken.
    pub async fn create(&self, path: &str) -> Result<FileStat> {
        self.create_mode(path, 0).await
    }

    /// Creates an empty regular file with these permission bits (0 = 0644).
    pub async fn create_mode(&self, path: &str, mode: u32) -> Result<FileStat> {
        validate::path("create", "path", path)?;
        let req = pb::CreateFileRequest { subvolume: self.sv(), path: path.into(), mode };
        Ok(Rpc::unary("create", self.rpc.files().create(self.rpc.request(req, None))).await?.into())
    }

    /// Every entry of a directory, in creation order.
    pub async fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        self.read_dir_paged(path, 0).await
    }

    /// [`Files::read_dir`] with `page_size` entries per call (0 = the server's 10,000).
    pub async fn read_dir_paged(&self, path: &str, page_size: u64) -> Result<Vec<DirEntry>> {
        validate::path("readdir", "path", path)?;
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let req = pb::ReadDirRequest { subvolume: self.sv(), path: path.into(), ino: 0, cookie, limit: page_size };
            let r = self
                .rpc
                .idempotent("readdir", self.rpc.deadline, |t| {
                    let mut c = self.rpc.files();
                    let r = self.rpc.request_exact(req.clone(), t);
                    async move { c.read_dir(r).await }
                })
                .await?;
            out.extend(r.entries.into_iter().map(|e| DirEntry {
                name: e.name,
                ino: e.ino,
                kind: FileKind::from_proto(e.kind),
                cookie: e.cookie,
            }));
            if !r.more {
                return Ok(out);
            }
            cookie = r.next_cookie;
        }
    }

    /// Renames (moves) a name; an existing file at `to` is replaced.
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.rename_flags(from, to, 0).await
    }

    /// Renames with [`RENAME_NOREPLACE`] or [`RENAME_EXCHANGE`].
    pub async fn rename_flags(&self, from: &str, to: &str, flags: u32) -> Result<()> {
        validate::path("rename", "from", from)?;
        validate::path("rename", "to", to)?;
        let req = pb::RenameRequest { subvolume: self.sv(), from: from.into(), to: to.into(), flags };
        Rpc::unary("rename", self.rpc.files().rename(self.rpc.request(req, None))).await?;
        Ok(())
    }

    /// Adds a hard link to a file (a directory: EPERM).
    pub async fn link(&self, existing: &str, new_path: &str) -> Result<FileStat> {
        validate::path("link", "existing", existing)?;
        validate::path("link", "new_path", new_path)?;
        let req = pb::LinkRequest {
            subvolume: self.sv(),
            existing: existing.into(),
            new_path: new_path.into(),
            ..Default::default()
        };
        Ok(Rpc::unary("link", self.rpc.files().link(self.rpc.request(req, None))).await?.into())
    }

    /// Creates a symlink at `path` holding `target` (never resolved).
    pub async fn symlink(&self, target: &str, path: &str) -> Result<FileStat> {
        validate::symlink_target("symlink", target)?;
        validate::path("symlink", "path", path)?;
        let req = pb::SymlinkRequest { subvolume: self.sv(), target: target.into(), path: path.into() };
        Ok(Rpc::unary("symlink", self.rpc.files().symlink(self.rpc.request(req, None))).await?.into())
    }

    /// A symlink's target.
    pub async fn read_link(&self, path: &str) -> Result<String> {
        validate::path("readlink", "path", path)?;
        let req = pb::ReadLinkRequest { subvolume: self.sv(), path: path.into() };
        Ok(self
            .rpc
            .idempotent("readlink", self.rpc.deadline, |t| {
                let mut c = self.rpc.files();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.read_link(r).await }
            })
            .await?
            .target)
    }

    /// Removes a name of a file or symlink (a directory: EISDIR).
    pub async fn unlink(&self, path: &str) -> Result<()> {
        validate::path("unlink", "path", path)?;
        let req = pb::UnlinkRequest { subvolume: self.sv(), path: path.into() };
        Rpc::unary("unlink", self.rpc.files().unlink(self.rpc.request(req, None))).await?;
        Ok(())
    }

    /// Removes an empty directory (ENOTEMPTY otherwise).
    pub async fn rmdir(&self, path: &str) -> Result<()> {
        validate::path("rmdir", "path", path)?;
        let req = pb::RmdirRequest { subvolume: self.sv(), path: path.into() };
        Rpc::unary("rmdir", self.rpc.files().rmdir(self.rpc.request(req, None))).await?;
        Ok(())
    }

    /// Sets a regular file's size (cuts, or extends with a hole).
    pub async fn truncate(&self, path: &str, size: u64) -> Result<FileStat> {
        validate::path("truncate", "path", path)?;
        let req = pb::TruncateRequest { subvolume: self.sv(), path: path.into(), ino: 0, size, ..Default::default() };
        Ok(Rpc::unary("truncate", self.rpc.files().truncate(self.rpc.request(req, None))).await?.into())
    }

    /// The whole file.
    pub async fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.read_range(path, 0, 0).await
    }

    /// `length` bytes from `offset` (0 = to EOF); shorter at EOF. Streamed in
    /// chunks of at most 1 MiB.
    pub async fn read_range(&self, path: &str, offset: u64, length: u64) -> Result<Vec<u8>> {
        validate::path("read", "path", path)?;
        let req =
            pb::ReadRequest { subvolume: self.sv(), path: path.into(), ino: 0, offset, length, ..Default::default() };
        let mut stream = self
            .rpc
            .idempotent("read", self.rpc.stream_deadline, |t| {
                let mut c = self.rpc.files();
                let r = self.rpc.request_exact(req.clone(), t);
                async move { c.read(r).await }
            })
            .await?;
        let mut out = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(m)) => out.extend_from_slice(&m.data),
                Ok(None) => return Ok(out),
                Err(s) => return Err(crate::Error::from_status(&s, "read")),
            }
        }
    }

    /// Creates or replaces the file's contents.
    pub async fn write(&self, path: &str, data: impl Into<Bytes>) -> Result<WriteResult> {
        self.write_with(path, data, WriteOptions { create: true, truncate: true, ..Default::default() }).await
    }

    /// Writes `data` with these options in one streamed Write call (data over
    /// 1 MiB goes in several chunks; each chunk is atomic, the stream is not).
    pub async fn write_with(&self, path: &str, data: impl Into<Bytes>, o: WriteOptions) -> Result<WriteResult> {
        validate::path("write", "path", path)?;
        let data: Bytes = data.into();
        let mut msgs = vec![pb::WriteRequest {
            subvolume: self.sv(),
            path: path.into(),
            ino: 0,
            offset: o.offset,
            create: o.create,
            mode: o.mode,
            truncate: o.truncate,
            data: Bytes::new(),
            ..Default::default()
        }];
        let mut at = 0;
        while at < data.len() {
            let end = (at + WRITE_CHUNK).min(data.len());
            msgs.push(pb::WriteRequest { data: data.slice(at..end), ..Default::default() });
            at = end;
        }
        self.write_stream(tokio_stream::iter(msgs)).await
    }

    /// One Write call from a stream of messages: the first names the file
    /// (subvolume, path or ino, offset, create, truncate; it may carry data),
    /// every further one carries data (at most 4 MiB each).
    pub async fn write_stream(
        &self,
        messages: impl tokio_stream::Stream<Item = pb::WriteRequest> + Send + 'static,
    ) -> Result<WriteResult> {
        let r = Rpc::unary("write", self.rpc.files().write(self.rpc.stream_request(messages))).await?;
        Ok(WriteResult { bytes_written: r.bytes_written, stat: r.stat.unwrap_or_default().into() })
    }

    /// Reflink: `dst` (which must exist) shares all of `src`'s extents.
    pub async fn clone_file(&self, src: &str, dst: &str) -> Result<()> {
        self.clone_range(src, 0, dst, 0, 0).await
    }

    /// Reflink a range (`length` 0 = to the source's EOF); no data is copied.
    pub async fn clone_range(&self, src: &str, src_offset: u64, dst: &str, dst_offset: u64, length: u64) -> Result<()> {
        validate::path("clone", "src_path", src)?;
        validate::path("clone", "dst_path", dst)?;
        let req = pb::CloneRequest {
            subvolume: self.sv(),
            src_path: src.into(),
            src_ino: 0,
            src_offset,
            dst_path: dst.into(),
            dst_ino: 0,
            dst_offset,
            length,
        };
        // The generated method is named `clone`, which Clone::clone shadows in method syntax.
        let mut files = self.rpc.files();
        let call = pb::files_client::FilesClient::clone(&mut files, self.rpc.request(req, None));
        Rpc::unary("clone", call).await?;
        Ok(())
    }

    /// Makes a file (a directory: and its entries) survive a crash.
    pub async fn fsync(&self, path: &str) -> Result<()> {
        self.fsync_with(path, false).await
    }

    /// `datasync`: fdatasync (skip the names of an inode older than the running commit).
    pub async fn fsync_with(&self, path: &str, datasync: bool) -> Result<()> {
        validate::path("fsync", "path", path)?;
        let req = pb::FsyncRequest { subvolume: self.sv(), path: path.into(), ino: 0, datasync, ..Default::default() };
        Rpc::unary("fsync", self.rpc.files().fsync(self.rpc.request(req, None))).await?;
        Ok(())
    }

    /// Every extent of the file, in file order.
    pub async fn fiemap(&self, path: &str) -> Result<Vec<Extent>> {
        self.fiemap_range(path, 0, 0).await
    }

    /// The extents holding a byte range (`length` 0 = to EOF), in file order,
    /// following `more` across responses.
    pub async fn fiemap_range(&self, path: &str, offset: u64, length: u64) -> Result<Vec<Extent>> {
        validate::path("fiemap", "path", path)?;
        let stop = if length > 0 { offset.saturating_add(length) } else { 0 };
        let mut off = offset;
        let mut out = Vec::new();
        loop {
            let req = pb::FiemapRequest {
                subvolume: self.sv(),
                path: path.into(),
                ino: 0,
                offset: off,
                length: if stop > 0 { stop - off } else { 0 },
                ..Default::default()
            };
            let r = self
                .rpc
                .idempotent("fiemap", self.rpc.deadline, |t| {
                    let mut c = self.rpc.files();
                    let r = self.rpc.request_exact(req.clone(), t);
                    async move { c.fiemap(r).await }
                })
                .await?;
            let last = r.extents.last().map(|e| e.logical + e.length);
            out.extend(r.extents.into_iter().map(|e| Extent {
                logical: e.logical,
                physical: e.physical,
                length: e.length,
                flags: e.flags,
            }));
            match last {
                Some(end) if r.more && (stop == 0 || end < stop) => off = end,
                _ => return Ok(out),
            }
        }
    }
}
