//! Open handles (Files.Open, CreateTmpfile, CloseHandle): a file unlinked
//! while open lives on (nlink 0) until its last handle closes; an O_TMPFILE
//! gets a name with [`FileHandle::link`] and is deleted if closed without one.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::files::{FileStat, Files, WriteResult, WRITE_CHUNK};
use crate::pb;
use crate::rpc::Rpc;
use crate::validate;

/// A file open on the server, with a lease every call on it renews; one
/// unused for longer is closed by the server (calls then fail with
/// `NotFound`, errno EBADF). Close it with [`FileHandle::close`] (dropping
/// it leaves the handle to its lease).
#[derive(Clone)]
pub struct FileHandle {
    files: Files,
    /// The server's handle.
    pub handle: u64,
    /// The file's inode number.
    pub ino: u64,
    /// The handle's lease in milliseconds.
    pub lease_ms: u64,
    /// The attributes at open.
    pub opened_stat: FileStat,
}

impl Files {
    fn handle_from(&self, m: pb::OpenResponse) -> FileHandle {
        FileHandle {
            files: self.clone(),
            handle: m.handle,
            ino: m.ino,
            lease_ms: m.lease_ms,
            opened_stat: m.stat.unwrap_or_default().into(),
        }
    }

    /// Opens a file on the server (`lease_ms` 0 = the server's 30 s): while
    /// the handle is open, removing the file's last name does not delete it.
    pub async fn open_handle(&self, path: &str, lease_ms: u64) -> Result<FileHandle> {
        validate::path("open", "path", path)?;
        let req = pb::OpenRequest { subvolume: self.sv(), path: path.into(), lease_ms, ..Default::default() };
        let m = Rpc::unary("open", self.rpc().files().open(self.rpc().request(req, None))).await?;
        Ok(self.handle_from(m))
    }

    /// O_TMPFILE: a new regular file without a name in directory `dir`
    /// (`mode` 0 = 0644), opened.
    pub async fn create_tmpfile(&self, dir: &str, mode: u32, lease_ms: u64) -> Result<FileHandle> {
        validate::path("tmpfile", "dir_path", dir)?;
        let req = pb::CreateTmpfileRequest {
            subvolume: self.sv(),
            dir_path: dir.into(),
            mode,
            lease_ms,
            ..Default::default()
        };
        let m = Rpc::unary("tmpfile", self.rpc().files().create_tmpfile(self.rpc().request(req, None))).await?;
        Ok(self.handle_from(m))
    }
}

impl FileHandle {
    fn rpc(&self) -> &Rpc {
        self.files.rpc()
    }

    /// The file's attributes now (nlink 0 once its last name went).
    pub async fn stat(&self) -> Result<FileStat> {
        let req = pb::StatRequest { subvolume: self.files.sv(), handle: self.handle, ..Default::default() };
        Ok(self
            .rpc()
            .idempotent("stat", self.rpc().deadline, |t| {
                let mut c = self.rpc().files();
                let r = self.rpc().request_exact(req.clone(), t);
                async move { c.stat(r).await }
            })
            .await?
            .into())
    }

    /// `length` bytes from `offset` (0 = to EOF).
    pub async fn read(&self, offset: u64, length: u64) -> Result<Vec<u8>> {
        let req =
            pb::ReadRequest { subvolume: self.files.sv(), handle: self.handle, offset, length, ..Default::default() };
        let mut stream = self
            .rpc()
            .idempotent("read", self.rpc().stream_deadline, |t| {
                let mut c = self.rpc().files();
                let r = self.rpc().request_exact(req.clone(), t);
                async move { c.read(r).await }
            })
            .await?;
        let mut out = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(m)) => out.extend_from_slice(&m.data),
                Ok(None) => return Ok(out),
                Err(s) => return Err(Error::from_status(&s, "read")),
            }
        }
    }

    /// Writes `data` at `offset` on one Write stream (chunks of 1 MiB).
    pub async fn write(&self, data: impl Into<Bytes>, offset: u64) -> Result<WriteResult> {
        let data: Bytes = data.into();
        let mut msgs = vec![pb::WriteRequest {
            subvolume: self.files.sv(),
            handle: self.handle,
            offset,
            data: data.slice(..data.len().min(WRITE_CHUNK)),
            ..Default::default()
        }];
        let mut at = data.len().min(WRITE_CHUNK);
        while at < data.len() {
            let end = (at + WRITE_CHUNK).min(data.len());
            msgs.push(pb::WriteRequest { data: data.slice(at..end), ..Default::default() });
            at = end;
        }
        self.files.write_stream(tokio_stream::iter(msgs)).await
    }

    /// Sets the file's size.
    pub async fn truncate(&self, size: u64) -> Result<FileStat> {
        let req = pb::TruncateRequest { subvolume: self.files.sv(), handle: self.handle, size, ..Default::default() };
        Ok(Rpc::unary("truncate", self.rpc().files().truncate(self.rpc().request(req, None))).await?.into())
    }

    /// Makes the file durable (also one without a name).
    pub async fn fsync(&self, datasync: bool) -> Result<()> {
        let req = pb::FsyncRequest { subvolume: self.files.sv(), handle: self.handle, datasync, ..Default::default() };
        Rpc::unary("fsync", self.rpc().files().fsync(self.rpc().request(req, None))).await?;
        Ok(())
    }

    /// Gives the file the name `new_path` (linkat): an O_TMPFILE's first
    /// name; a file whose names all went is `NotFound` (ENOENT).
    pub async fn link(&self, new_path: &str) -> Result<FileStat> {
        validate::path("link", "new_path", new_path)?;
        let req = pb::LinkRequest {
            subvolume: self.files.sv(),
            handle: self.handle,
            new_path: new_path.into(),
            ..Default::default()
        };
        Ok(Rpc::unary("link", self.rpc().files().link(self.rpc().request(req, None))).await?.into())
    }

    /// Closes the handle; the last one of a file without a name deletes it.
    pub async fn close(self) -> Result<()> {
        let req = pb::CloseRequest { handle: self.handle };
        Rpc::unary("close", self.rpc().files().close_handle(self.rpc().request(req, None))).await?;
        Ok(())
    }
}
